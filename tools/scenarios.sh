#!/usr/bin/env bash
# Run molecule scenarios one after another, each timed by tools/stage.sh; stop at the
# first that fails. Usage: tools/scenarios.sh SCENARIO...
set -euo pipefail
for s in "$@"; do
  echo "== molecule test -s $s"
  bash tools/stage.sh "  $s" molecule test -s "$s"
done
