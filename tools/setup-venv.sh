#!/usr/bin/env bash
# Create .venv from the frozen requirements and make the checkout resolvable as
# sparkfleet.serving, plus the development collections of requirements-dev.yml (the twin's
# and molecule's, not the shipped content's), taken from the ansible bundle wheel because
# Galaxy is not reachable. Idempotent.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
ansible_bundle=ansible==12.3.0
bundle_wheel=.cache/wheels/ansible-12.3.0-py3-none-any.whl
colls=.collections/ansible_collections

log() { printf 'setup: %s\n' "$*"; }

if [[ ! -x .venv/bin/python ]]; then
  log "creating .venv"
  python3 -m venv .venv
fi
if [[ ! -f .venv/.requirements.stamp ]] || ! cmp -s requirements.txt .venv/.requirements.stamp; then
  log "installing requirements.txt into .venv"
  .venv/bin/pip install -q --disable-pip-version-check -r requirements.txt
  cp requirements.txt .venv/.requirements.stamp
else
  log ".venv matches requirements.txt"
fi

# The controller's own module runs (delegate_to localhost: the scenarios' nested runs, docker
# commands, the canary's and the upgrade's results) keep the bytecode of their zipped payloads,
# as the twin's nodes do (twin/images/node/sparksim_zipcache.py, the one copy of that hook):
# 0.40 against 0.30 CPU-s a `command` run on localhost, about 800 of them in `make test`. The
# code run is the same; this venv is the checkout's test bed, not what an operator installs.
site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
pth="import sparksim_zipcache; sparksim_zipcache.CACHE = '$root/.cache/pyc'"
if [[ "$(readlink "$site/sparksim_zipcache.py" 2>/dev/null)" != "$root/twin/images/node/sparksim_zipcache.py" ]] \
  || [[ "$(cat "$site/sparksim-zipcache.pth" 2>/dev/null)" != "$pth" ]]; then
  mkdir -p .cache/pyc
  ln -sfn "$root/twin/images/node/sparksim_zipcache.py" "$site/sparksim_zipcache.py"
  printf '%s\n' "$pth" >"$site/sparksim-zipcache.pth"
  log "the venv keeps the bytecode of zipped module payloads in .cache/pyc"
fi

mkdir -p "$colls/sparkfleet"
if [[ "$(readlink "$colls/sparkfleet/serving" 2>/dev/null)" != "../../.." ]]; then
  rm -rf "$colls/sparkfleet/serving"
  ln -s ../../.. "$colls/sparkfleet/serving"
  log "linked the checkout as sparkfleet.serving"
fi

mapfile -t deps < <(.venv/bin/python -c '
import sys, yaml
for c in yaml.safe_load(open(sys.argv[1]))["collections"]:
    print(c["name"].replace(".", "/"))
' requirements-dev.yml)
need=0
for d in "${deps[@]}"; do [[ -f "$colls/$d/MANIFEST.json" ]] || need=1; done
if ((need)); then
  if [[ ! -f "$bundle_wheel" ]]; then
    log "downloading $ansible_bundle (collections bundle)"
    mkdir -p .cache/wheels
    .venv/bin/pip download -q --disable-pip-version-check --no-deps "$ansible_bundle" -d .cache/wheels
  fi
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  patterns=()
  for d in "${deps[@]}"; do patterns+=("ansible_collections/$d/*"); done
  .venv/bin/python - "$bundle_wheel" "$tmp" "${patterns[@]}" <<'PY'
import fnmatch
import sys
import zipfile

wheel, dest, *patterns = sys.argv[1:]
with zipfile.ZipFile(wheel) as zf:
    members = [n for n in zf.namelist() if any(fnmatch.fnmatch(n, p) for p in patterns)]
    zf.extractall(dest, members)
PY
  for d in "${deps[@]}"; do
    mkdir -p "$colls/$(dirname "$d")"
    rm -rf "${colls:?}/$d"
    mv "$tmp/ansible_collections/$d" "$colls/$d"
    log "installed $d from the bundle wheel"
  done
fi
