#!/usr/bin/env bash
# ansible-test sanity on a real copy of the collection (ansible-test resolves
# symlinks, so the .collections link will not do). The twin, its tests and the
# tooling are not collection content and stay out of the copy. ansible-test bootstraps pip from
# a host this machine cannot reach; it reads a cached get-pip script first, so one
# is put there that uses ensurepip instead (see ../shared/TESTBED.md).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
work="$root/.cache/sanity/ansible_collections/sparkfleet/serving"
venv="$root/.venv"

pip_version=$(grep -rhoE "^pip==[0-9.]+" "$venv"/lib/python3*/site-packages/ansible_test/_data/requirements/ 2>/dev/null | head -n 1 | cut -d= -f3 || true)
pip_version=${pip_version:-24_2}
pip_version=${pip_version//./_}
cache="$HOME/.ansible/test/cache"
mkdir -p "$cache"
cat >"$cache/get_pip_${pip_version}.py" <<'PY'
"""Stand-in for get-pip.py: ensurepip, then pip install what was asked."""
import subprocess
import sys

subprocess.check_call([sys.executable, "-m", "ensurepip", "--upgrade"])
args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
if args:
    subprocess.check_call([sys.executable, "-m", "pip", "install", *args])
PY

rm -rf "$work"
mkdir -p "$work"
tar -C "$root" -c \
  --exclude ./.git --exclude ./.venv --exclude ./.cache --exclude ./.collections --exclude ./.ansible \
  --exclude ./tests/output --exclude __pycache__ --exclude .pytest_cache --exclude .ruff_cache \
  --exclude ./twin --exclude ./molecule --exclude ./tools --exclude ./tests/twin --exclude ./.config \
  --exclude ./.ci . |
  tar -C "$work" -x
cd "$work"
# ansible-test only tests files git knows about when it finds a repository.
git init -q . 2>/dev/null || true
git add -A >/dev/null 2>&1
PATH="$venv/bin:$PATH" "$venv/bin/ansible-test" sanity --venv --python 3.11 "$@"
