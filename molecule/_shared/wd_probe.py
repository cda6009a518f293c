"""Read the head's watchdog state and wait for it to reach a condition.

Run on the head: docker exec -i spark-1 python3 - MODE ARGS < wd_probe.py
  now                          print the node's clock (epoch seconds)
  obs AFTER KIND TIMEOUT       wait for an observation newer than AFTER of KIND (or 'any')
  restart AFTER TIMEOUT        wait for a restart decided after AFTER that ended (any rc)
  healed AFTER TIMEOUT         wait for a restart decided after AFTER that ended healthy (rc 0)
  gaveup TIMEOUT               wait for the gave-up marker
  reboot TIMEOUT               wait for the reboot-required marker
Prints one JSON object: the state file, the markers and what was waited for.
"""

import json
import os
import sys
import time

STATE_DIR = "/var/lib/sparkfleet/watchdog"


def snapshot():
    try:
        with open(os.path.join(STATE_DIR, "state.json")) as fh:
            state = json.load(fh)
    except (OSError, ValueError):
        state = {}
    out = {"now": time.time(), "state": state}
    for name in ("paused", "gave-up", "reboot-required"):
        path = os.path.join(STATE_DIR, name)
        out[name] = None
        if os.path.exists(path):
            with open(path) as fh:
                out[name] = fh.read()
    return out


def wait(pred, timeout):
    deadline = time.time() + timeout
    while True:
        snap = snapshot()
        hit = pred(snap)
        if hit is not None:
            snap["hit"] = hit
            return snap, 0
        if time.time() > deadline:
            snap["hit"] = None
            return snap, 1
        time.sleep(1)


def main(mode, *args):
    if mode == "now":
        print(json.dumps({"now": time.time()}))
        return 0
    if mode == "obs":
        after, kind, timeout = float(args[0]), args[1], float(args[2])

        def pred(snap):
            obs = snap["state"].get("last_observation") or {}
            if obs.get("time", 0) > after and kind in ("any", obs.get("kind")):
                return obs
            return None

        snap, rc = wait(pred, timeout)
    elif mode == "restart":
        after, timeout = float(args[0]), float(args[1])

        def pred(snap):
            done = [r for r in snap["state"].get("restarts", []) if r["time"] > after]
            return done[-1] if done else None

        snap, rc = wait(pred, timeout)
    elif mode == "healed":
        after, timeout = float(args[0]), float(args[1])

        def pred(snap):
            done = [
                r
                for r in snap["state"].get("restarts", [])
                if r["time"] > after and r.get("rc") == 0
            ]
            return done[-1] if done else None

        snap, rc = wait(pred, timeout)
    elif mode == "gaveup":
        snap, rc = wait(lambda s: s["gave-up"], float(args[0]))
    elif mode == "reboot":
        snap, rc = wait(lambda s: s["reboot-required"], float(args[0]))
    else:
        raise SystemExit("unknown mode " + mode)
    print(json.dumps(snap))
    return rc


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
