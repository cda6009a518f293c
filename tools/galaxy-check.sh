#!/usr/bin/env bash
# The galaxy artefact as Galaxy and an execution-environment build see it, with no container
# engine: build the tarball from this checkout (galaxy.yml build_ignore decides what ships),
# run galaxy-importer on it (ansible-doc in-process, no ansible-test, which would need
# docker/podman), then render the execution environment's build context with
# `ansible-builder create` (schema-checked by ansible-builder). galaxy-importer and
# ansible-builder live in their own venv, .cache/galaxy-venv, made from the frozen
# tools/galaxy-requirements.txt (galaxy-importer pins attrs<24, which the dev venv cannot have).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
venv=.cache/galaxy-venv
reqs=tools/galaxy-requirements.txt

log() { printf 'galaxy-check: %s\n' "$*"; }

if [[ ! -x $venv/bin/python ]] || ! cmp -s "$reqs" "$venv/.requirements.stamp"; then
  log "creating $venv from $reqs"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$reqs" 2>&1 | grep -v "^WARNING: Location" >&2 || true
  "$venv/bin/python" -c "import galaxy_importer, ansible_builder" # the install above worked
  cp "$reqs" "$venv/.requirements.stamp"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# galaxy-importer finds ansible-doc and ansible-lint on PATH; nothing of the dev venv.
export PATH="$root/$venv/bin:/usr/local/bin:/usr/bin:/bin"
# A HOME of its own: nothing installed for the user (~/.ansible/collections) is read, and
# ansible-lint's caches are not left behind.
export HOME="$work/home" ANSIBLE_COLLECTIONS_PATH="$work/none" ANSIBLE_LOCAL_TEMP="$work/tmp"
unset ANSIBLE_CONFIG
mkdir -p "$HOME"

ansible-galaxy collection build "$root" --output-path "$work" >/dev/null
tarball=$(echo "$work"/sparkfleet-serving-*.tar.gz)
log "built $(basename "$tarball") ($(du -k "$tarball" | cut -f1) KiB, $(tar tzf "$tarball" | grep -vc '/$') files)"

cat >"$work/galaxy-importer.cfg" <<'CFG'
[galaxy-importer]
run_ansible_test = False
ansible_test_local_image = False
local_image_docker = False
run_ansible_doc = True
# Galaxy reports ansible-lint findings as warnings, never as a refusal, and `make lint` already
# runs ansible-lint (production profile, no rule skipped) on the same files; the importer's own
# run costs 30-70 s. GALAXY_IMPORTER_RUN_ANSIBLE_LINT=True bash tools/galaxy-check.sh runs it
# too (the importer reads that variable), and then any warning it prints fails this script.
run_ansible_lint = False
offline_ansible_lint = True
run_flake8 = False
check_changelog = True
CFG
(
  cd "$work"
  GALAXY_IMPORTER_CONFIG="$work/galaxy-importer.cfg" python -m galaxy_importer.main "$tarball" >importer.log 2>&1
) || {
  grep -v '^Loading ' "$work/importer.log" >&2
  log "galaxy-importer rejected the tarball (above)"
  exit 1
}
python - "$work/importer_result.json" "$work/importer.log" <<'PY'
import json
import re
import sys

result = json.load(open(sys.argv[1], encoding="utf-8"))
log = open(sys.argv[2], encoding="utf-8").read()
# Every message above INFO the importer printed (ansible-lint findings come as WARNING).
noise = [line for line in log.splitlines() if re.match(r"(WARNING|ERROR)\b", line)]
roles = [c for c in result["docs_blob"]["contents"] if c["content_type"] == "role"]
bad = [c["content_name"] for c in roles if not c.get("readme_html")]
if noise or bad or not roles:
    print("\n".join(noise), file=sys.stderr)
    print(f"galaxy-check: roles without a readme: {bad}", file=sys.stderr)
    sys.exit(1)
kinds = {}
for c in result["contents"]:
    kinds[c["content_type"]] = kinds.get(c["content_type"], 0) + 1
print(f"galaxy-check: galaxy-importer passed: {kinds}, every role with its README")
PY

mkdir -p "$work/ee/.cache/ee"
cp execution-environment.yml "$work/ee/"
cp "$tarball" "$work/ee/.cache/ee/sparkfleet-serving.tar.gz"
(cd "$work/ee" && ansible-builder create -f execution-environment.yml -c context >/dev/null)
grep -q 'ansible-galaxy collection install .*-r requirements.yml' "$work/ee/context/Dockerfile"
python - "$work/ee/context" <<'PY'
import os
import sys

import yaml

ctx = sys.argv[1]
galaxy = yaml.safe_load(open(os.path.join(ctx, "_build", "requirements.yml"), encoding="utf-8"))
(coll,) = galaxy["collections"]
tar = os.path.join(ctx, "_build", "collection", "sparkfleet-serving.tar.gz")
assert os.path.isfile(tar), "the collection tarball is not in the build context"
assert coll["name"] == "/build/collection/sparkfleet-serving.tar.gz", coll
pip = open(os.path.join(ctx, "_build", "requirements.txt"), encoding="utf-8").read().split()
assert any(p.startswith("pip") for p in pip), pip
print("galaxy-check: ansible-builder create rendered the execution environment's build context")
PY
