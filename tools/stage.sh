#!/usr/bin/env bash
# Run one stage of `make test`, print its wall time, and keep a line per stage in
# .cache/stages.log so the total can be reported stage by stage. The stage's output is
# also kept in .cache/stage-<name>.log: tools/failed-tails.sh prints the end of each failed
# one after the summary, where a CI log that shows only its last lines still shows why.
set -euo pipefail
name=$1
shift
mkdir -p .cache
log=".cache/stage-${name// /}.log"
start=$(date +%s)
status=0
"$@" 2>&1 | tee "$log" || status=$?
took=$(($(date +%s) - start))
printf '%-10s %4ss  %s\n' "$name" "$took" "$([[ $status == 0 ]] && echo ok || echo "FAILED ($status)")" | tee -a .cache/stages.log
exit "$status"
