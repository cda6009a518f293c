#!/usr/bin/env bash
# Run commands side by side, each line of output prefixed with its lane's name, and
# fail if any lane failed (after all have ended). `make test` runs the 4-node twin's
# scenario in one lane and the checks and 2-node scenarios in the other: the twins
# have their own container names and subnets (inventory/sim, inventory/sim-2node and
# sim-ssh), and most of a scenario's wall time is waiting on the nodes, not the CPU.
# Usage: tools/lanes.sh NAME 'COMMAND' [NAME 'COMMAND' ...]
set -uo pipefail
pids=()
names=()
while (($# >= 2)); do
  name=$1 command=$2
  shift 2
  # Each line gets its lane's name and the wall clock (bash's own strftime: no fork per
  # line), so a CI log shows where a lane spent its time.
  (set -o pipefail; bash -c "$command" 2>&1 | while IFS= read -r line; do printf '[%s %(%T)T] %s\n' "$name" -1 "$line"; done) &
  pids+=("$!")
  names+=("$name")
done
status=0
for i in "${!pids[@]}"; do
  if wait "${pids[$i]}"; then
    echo "== lane ${names[$i]}: ok"
  else
    echo "== lane ${names[$i]}: FAILED"
    status=1
  fi
done
exit "$status"
