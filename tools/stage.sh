#!/usr/bin/env bash
# Run one stage of `make test`, print its wall time, and keep a line per stage in
# .cache/stages.log so the total can be reported stage by stage.
set -euo pipefail
name=$1
shift
mkdir -p .cache
start=$(date +%s)
status=0
"$@" || status=$?
took=$(($(date +%s) - start))
printf '%-10s %4ss  %s\n' "$name" "$took" "$([[ $status == 0 ]] && echo ok || echo "FAILED ($status)")" | tee -a .cache/stages.log
exit "$status"
