#!/usr/bin/env bash
# After `make test`'s stage summary: why each failed stage failed (its log kept by
# tools/stage.sh): the first failed tasks or tests with what follows them, then its last
# lines (pytest's and molecule's own summaries). A CI log that shows only its end still
# shows the cause.
set -uo pipefail
[[ -f .cache/stages.log ]] || exit 0
grep 'FAILED' .cache/stages.log | while read -r name _; do
  log=".cache/stage-${name}.log"
  [[ -f $log ]] || continue
  echo "== why $name failed (${log})"
  sed -e 's/\x1b\[[0-9;]*m//g' "$log" \
    | grep -a -m 6 -A 14 -E 'fatal: \[|FAILED! =>|^(FAILED|ERROR) |^E  |Error: ' | head -n 120
  echo "== the last lines of $name"
  tail -n 40 "$log" | sed -e 's/\x1b\[[0-9;]*m//g'
done
