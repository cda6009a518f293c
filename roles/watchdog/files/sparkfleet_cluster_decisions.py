# Copyright: sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The watchdog's pure decisions (unit-tested): what an observation of the cluster is, when
a bad one is confirmed, whether a restart may follow, when to look again, how long a node
has been gone and whether the head still generates (see sparkfleet_cluster_watchdog.py).
"""

from __future__ import annotations

import re

from sparkfleet_cluster_common import GONE, iso, setting

CRASH, WEDGED, UNREACHABLE = "crash", "wedged", "unreachable"
REBOOT = "reboot-required"
# Every kind an observation can have, one textfile series each (sparkfleet_watchdog_observation).
KINDS = (
    "healthy",
    "booting",
    "stopped",
    CRASH,
    WEDGED,
    UNREACHABLE,
    "unknown",
    "paused",
    "held",
    "busy",
    "gave-up",
    REBOOT,
)
BAD = (CRASH, WEDGED)

# The patched SGLang watchdog (HARDEN-PATCH watchdog_stack_dump) logs this line
# before every thread's stack; upstream's own timeout line names the watchdog.
STACK_START = re.compile(r"Python stacks of all \d+ threads|watchdog timeout", re.IGNORECASE)


def classify(obs, grace_s, now):
    """Name one observation of the cluster: (kind, reason).

    obs: {"head": {"host", "state", "started_at", "health"},
          "workers": [{"host", "rank", "state"}]}
    kinds: unreachable, stopped, crash, unknown, healthy, booting, wedged.
    A node that does not answer comes first, whatever the other ranks do: its
    peers' ranks exit when it goes (as NCCL ranks do), which is not a crash to
    restart while it is gone.
    """
    head = obs["head"]
    ranks = [head, *list(obs["workers"])]
    lost = unreachable_hosts(obs)
    if lost:
        return (
            UNREACHABLE,
            "cannot reach {}; waiting for it to answer, no restart while it is gone".format(
                ", ".join(f"{host} ({why})" for host, why in lost.items())
            ),
        )
    stopped = [r["host"] for r in ranks if r["state"] == "stopped"]
    if stopped:
        return "stopped", "deliberately stopped on {} (sparkfleet-sglang stop); left alone".format(
            ", ".join(stopped)
        )
    gone = [
        f"{r['host']} (rank {r.get('rank', 0)}) is {r['state']}"
        for r in ranks
        if r["state"] in GONE
    ]
    if gone:
        return CRASH, "engine gone: " + ", ".join(gone)
    unknown = [
        "{}: {}".format(r["host"], r["state"])
        for r in ranks
        if not r["state"].startswith("running") and r["state"] not in ("paused", "restarting")
    ]
    if unknown:
        return "unknown", "unexpected launcher state " + ", ".join(unknown)
    if head["health"] == 200:
        return "healthy", "head answers /health 200"
    started = head.get("started_at")
    age = now - started if started else None
    what = "paused (frozen)" if head["state"] == "paused" else "up"
    answer = "no answer" if not head["health"] else "HTTP {}".format(head["health"])
    if age is not None and age < grace_s:
        return "booting", (
            f"head {head['host']} {what} for {age:.0f} s, /health {answer}; "
            f"within the {grace_s} s grace"
        )
    for_how_long = f"{age:.0f} s" if age is not None else "an unknown time"
    return WEDGED, (
        f"head {head['host']} {what} for {for_how_long}, /health {answer}; "
        f"past the {grace_s} s grace"
    )


def unreachable_hosts(obs):
    """{host: why} of the ranks whose node did not answer."""
    return {
        r["host"]: r["state"].partition(": ")[2] or r["state"]
        for r in [obs["head"], *list(obs["workers"])]
        if r["state"].startswith(UNREACHABLE)
    }


def track_unreachable(state, lost, now, bound_s):
    """Keep state["unreachable"] ({host: since, error, past_bound}) in step with one observation.

    Returns the changes worth one log line each: (level, message).
    """
    known = state.get(UNREACHABLE, {})
    changes = []
    for host in sorted(set(known) - set(lost)):
        gone_s = now - known[host]["since"]
        changes.append(("INFO", f"{host} answers again after {gone_s:.0f} s unreachable"))
        state["returned"] = {"host": host, "time": now, "at": iso(now), "after_s": round(gone_s)}
    current = {}
    for host, why in sorted(lost.items()):
        # A node that goes is logged with the observation (its set of nodes changed).
        entry = dict(known.get(host) or {"since": now, "since_at": iso(now)}, error=why)
        gone_s = now - entry["since"]
        entry["for_s"] = round(gone_s)
        if gone_s >= bound_s and not entry.get("past_bound"):
            entry["past_bound"] = True
            changes.append(
                (
                    "ERROR",
                    f"{host} has not answered for {gone_s:.0f} s (since {entry['since_at']}, "
                    f"past watchdog_unreachable_s={bound_s}): check the node (power, "
                    "management network, sshd); the watchdog keeps waiting and restarts the "
                    "cluster when it answers",
                )
            )
        current[host] = entry
    if current:
        state[UNREACHABLE] = current
    else:
        state.pop(UNREACHABLE, None)
    return changes


def restarts_in_window(state, window_s, now):
    return [r for r in state.get("restarts", []) if now - r["time"] < window_s]


def gate_restart(state, cfg, now):
    """May the watchdog restart now? (verdict, reason) with verdict restart|backoff|give-up.

    A restart that could not reach a node (transient) backs off like any other,
    but never counts towards the give-up bound. One refused by a node still booting
    (its port coming up) is retried after backoff_s, not a doubled wait: the port is
    expected within the boot window, and the heal should follow it closely.
    """
    recent = restarts_in_window(state, cfg["window_s"], now)
    counted = [r for r in recent if not r.get("transient")]
    if len(counted) >= cfg["max_restarts"]:
        return (
            "give-up",
            f"{len(counted)} restarts within {cfg['window_s']} s "
            f"(watchdog_max_restarts={cfg['max_restarts']}); the cluster keeps failing",
        )
    if recent:
        doubling = [r for r in recent if not r.get("booting")]
        wait = min(cfg["backoff_s"] * 2 ** max(len(doubling) - 1, 0), cfg["window_s"])
        last = max(r["time"] for r in recent)
        if now < last + wait:
            return (
                "backoff",
                f"backing off: {len(recent)} restart(s) in the window, "
                f"next allowed at {iso(last + wait)} ({last + wait - now:.0f} s)",
            )
    return "restart", f"{len(recent)} restart(s) in the last {cfg['window_s']} s"


def note_observation(state, kind, now, interval_s):
    """Count consecutive bad observations (also across cron runs). Returns the count."""
    prev = state.get("bad")
    if kind in BAD:
        if prev and prev.get("kind") == kind and now - prev["last"] <= 2 * interval_s + 15:
            prev.update(count=prev["count"] + 1, last=now)
        else:
            state["bad"] = {"kind": kind, "count": 1, "first": now, "last": now}
        return state["bad"]["count"]
    state.pop("bad", None)
    return 0


def track_progress(state, progress, now, stall_s, interval_s):
    """Keep state["progress"] in step with one reading of the head's /metrics.

    Returns the reason when the head is stalled (it answers /health, requests are
    running, and the generated-token counter has not moved for stall_s), else None.
    The clock starts afresh when nothing runs, when the counter moves (a restart
    resets it) and when the previous reading is not the last observation's (a pause,
    a hold or a gap between runs is no evidence of a stall).
    """
    prev = state.get("progress")
    if progress is None or stall_s <= 0:
        state.pop("progress", None)
        return None
    # A request that arrived since the last reading started its clock at this one, not at the
    # idle reading before it (a stall is never judged longer than it was seen).
    moved = (
        not prev
        or now - prev["seen"] > 2 * interval_s + 15
        or progress["tokens"] != prev["tokens"]
        or progress["running"] <= 0
        or prev["running"] <= 0
    )
    entry = {
        "tokens": progress["tokens"],
        "running": progress["running"],
        "seen": now,
        "moved": now if moved else prev["moved"],
    }
    state["progress"] = entry
    still = now - entry["moved"]
    if progress["running"] > 0 and still >= stall_s:
        return (
            f"answers /health 200 but generated no token for {still:.0f} s with "
            f"{progress['running']:g} request(s) running (watchdog_stall_s={stall_s})"
        )
    return None


def settle_left(state, now, wd):
    """Seconds until a node that answered again has been back for one interval (0: settled).

    A node that has just booted may answer SSH before its docker does: what it
    reports in that first interval is not acted on yet.
    """
    returned = (state.get("returned") or {}).get("time")
    if returned is None:
        return 0.0
    return max(0.0, returned + wd["interval_s"] - now)


def next_pause(state, wd):
    """Seconds until the next observation: the interval, or sooner to confirm a bad one.

    A first bad observation is confirmed ``confirm_after_s`` later instead of a whole
    interval later, so a crash is acted on within about one interval plus that delay;
    one seen right after a node answered again, once that node has settled.
    """
    bad = state.get("bad") or {}
    if bad.get("kind") in BAD:
        left = settle_left(state, bad.get("last", 0), wd)
        if bad.get("count", 0) < wd["confirm"] or left > 0:
            confirm_after = min(setting(wd, "confirm_after_s"), wd["interval_s"])
            return min(max(confirm_after, left), wd["interval_s"])
    return wd["interval_s"]


def stack_section(lines):
    """The lines from the first watchdog timeout / stack dump line on."""
    for i, line in enumerate(lines):
        if STACK_START.search(line):
            return lines[i:]
    return []
