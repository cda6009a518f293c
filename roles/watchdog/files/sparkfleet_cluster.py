# Copyright: sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Cluster control and self-healing watchdog of one sparkfleet SGLang cluster.

Installed on the head (rank 0) by the role sparkfleet.serving.watchdog, with two
wrappers that run it as `python3 sparkfleet_cluster.py cluster|watchdog ARGS`:

  sparkfleet-cluster status|check|restart|stop|start
      The one ordered restart of the cluster: check that every rank can start
      (nothing is stopped otherwise), stop every rank, start the workers from
      rank N-1 down to 1, the head last, wait for the head's /health. The
      bring-up of site.yml, restart.yml and the watchdog all call it. Workers are
      reached over SSH with a key that can run only their launcher's verbs.

  sparkfleet-watchdog run|status|pause|resume|clear
      Run by cron every minute; observes the cluster several times inside its
      minute and restarts it (through the code above) after two consecutive bad
      observations: a crashed rank (container missing or exited), or a head that
      is up but has not answered /health for longer than the grace period (a
      wedge). A healthy or booting cluster, a deliberate stop, a paused watchdog
      or a cluster operation in progress is left alone. Restarts back off and are
      bounded per window; past the bound, or when a launcher refuses to start,
      the watchdog gives up (a marker file) until an operator clears it.

Every setting comes from one JSON file rendered by the role (see CONFIG).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import datetime
import errno
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request

CONFIG = os.environ.get("SPARKFLEET_CLUSTER_CONFIG", "/etc/sparkfleet/cluster.json")

EX_REFUSED = 3  # a launcher refused to start: nothing was stopped
EX_FAILED = 4  # a stop or start failed part-way
EX_UNHEALTHY = 5  # started, but the head did not answer /health in time
EX_BUSY = 75  # another run holds the lock (EX_TEMPFAIL)

# Launcher states (sparkfleet-sglang status) that mean the rank's engine is gone.
GONE = ("absent", "exited", "dead", "created", "removing")
CRASH, WEDGED = "crash", "wedged"
BAD = (CRASH, WEDGED)

# The patched SGLang watchdog (HARDEN-PATCH watchdog_stack_dump) logs this line
# before every thread's stack; upstream's own timeout line names the watchdog.
STACK_START = re.compile(r"Python stacks of all \d+ threads|watchdog timeout", re.IGNORECASE)


def utcnow():
    return time.time()


def iso(ts):
    return (
        datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).strftime(
            "%Y-%m-%dT%H:%M:%S.%fZ"
        )[:-4]
        + "Z"
    )


def parse_docker_time(text):
    """Docker's StartedAt (RFC 3339, nanoseconds) as epoch seconds, or None."""
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$", text.strip())
    if not m or m.group(1).startswith("0001-"):
        return None
    frac = float("0" + m.group(2)) if m.group(2) else 0.0
    tz = "+00:00" if m.group(3) == "Z" else m.group(3)
    return datetime.datetime.fromisoformat(m.group(1) + tz).timestamp() + frac


# --- pure decisions (unit-tested) ----------------------------------------------


def classify(obs, grace_s, now):
    """Name one observation of the cluster: (kind, reason).

    obs: {"head": {"host", "state", "started_at", "health"},
          "workers": [{"host", "rank", "state"}]}
    kinds: stopped, crash, unreachable, healthy, booting, wedged, stale.
    """
    head = obs["head"]
    ranks = [head, *list(obs["workers"])]
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
    lost = [
        "{} ({})".format(w["host"], w["state"])
        for w in obs["workers"]
        if w["state"].startswith("unreachable")
    ]
    if lost:
        return "unreachable", "cannot reach " + ", ".join(lost) + "; nothing to restart from here"
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


def restarts_in_window(state, window_s, now):
    return [r for r in state.get("restarts", []) if now - r["time"] < window_s]


def gate_restart(state, cfg, now):
    """May the watchdog restart now? (verdict, reason) with verdict restart|backoff|give-up."""
    recent = restarts_in_window(state, cfg["window_s"], now)
    if len(recent) >= cfg["max_restarts"]:
        return (
            "give-up",
            f"{len(recent)} restarts within {cfg['window_s']} s "
            f"(watchdog_max_restarts={cfg['max_restarts']}); the cluster keeps failing",
        )
    if recent:
        wait = cfg["backoff_s"] * 2 ** (len(recent) - 1)
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


def stack_section(lines):
    """The lines from the first watchdog timeout / stack dump line on."""
    for i, line in enumerate(lines):
        if STACK_START.search(line):
            return lines[i:]
    return []


# --- the machine side ------------------------------------------------------------


class Log:
    def __init__(self, path, name, echo=False):
        self.path, self.name, self.echo = path, name, echo

    def __call__(self, msg, level="INFO"):
        line = f"{iso(utcnow())} {self.name} {level}: {msg}\n"
        if self.path:
            os.makedirs(os.path.dirname(self.path), mode=0o750, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(line)
        if self.echo:
            sys.stderr.write(line)


@contextlib.contextmanager
def flocked(path, wait_s=0.0):
    """flock(2) on path (the same lock as util-linux flock(1)); yields False when busy."""
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES) or time.monotonic() >= deadline:
                    yield False
                    return
                time.sleep(0.5)
        yield True
    finally:
        os.close(fd)


def write_json(path, data, mode=0o644):
    """Atomically: a reader never sees half a file."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(
        os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode), "w", encoding="utf-8"
    ) as fh:
        json.dump(data, fh, indent=2, sort_keys=True)
        fh.write("\n")
    os.replace(tmp, path)


def read_json(path, default):
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return default


def which(name):
    found = shutil.which(
        name, path=os.environ.get("PATH", "") + ":/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin"
    )
    if not found:
        raise SystemExit(f"{name} not found on this node")
    return found


class Cluster:
    """The ranks of one cluster, driven through each node's launcher."""

    def __init__(self, cfg, log):
        self.cfg, self.log = cfg, log
        self.ranks = sorted(cfg["ranks"], key=lambda r: r["rank"])
        self.head = self.ranks[0]
        self.workers = self.ranks[1:]

    def run(self, rank, *verb, timeout=None):
        """(rc, stdout, stderr) of the launcher verb on that rank."""
        if rank["rank"] == 0:
            argv = [self.cfg["launcher"], *verb]
        else:
            ssh = self.cfg["ssh"]
            argv = [
                which("ssh"),
                "-i",
                ssh["key"],
                "-o",
                "IdentitiesOnly=yes",
                "-o",
                "BatchMode=yes",
                "-o",
                "StrictHostKeyChecking=yes",
                "-o",
                "UserKnownHostsFile=" + ssh["known_hosts"],
                "-o",
                f"ConnectTimeout={ssh['connect_timeout_s']}",
                "-o",
                "LogLevel=ERROR",
                "{}@{}".format(ssh["user"], rank["address"]),
                " ".join(verb),
            ]
        try:
            res = subprocess.run(
                argv,
                capture_output=True,
                text=True,
                timeout=timeout or self.cfg["command_timeout_s"],
                check=False,
            )
        except subprocess.TimeoutExpired:
            return (
                124,
                "",
                "timed out after {} s: {}".format(
                    timeout or self.cfg["command_timeout_s"], " ".join(verb)
                ),
            )
        return res.returncode, res.stdout.strip(), res.stderr.strip()

    def each(self, ranks, *verb):
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(ranks))) as pool:
            return dict(
                zip([r["host"] for r in ranks], pool.map(lambda r: self.run(r, *verb), ranks))
            )

    def states(self, ranks=None):
        out = {}
        for host, (rc, stdout, stderr) in self.each(ranks or self.ranks, "status").items():
            if rc == 255:
                out[host] = "unreachable: " + (stderr.splitlines() or ["ssh failed"])[-1]
            elif rc != 0:
                out[host] = f"unknown: rc={rc} {stderr}"
            else:
                out[host] = stdout or "unknown"
        return out

    def head_health(self):
        try:
            with urllib.request.urlopen(
                self.cfg["health_url"], timeout=self.cfg["health_timeout_s"]
            ) as resp:
                return resp.status
        except urllib.error.HTTPError as exc:
            return exc.code
        except (OSError, ValueError):
            return 0

    def head_started_at(self):
        res = subprocess.run(
            [
                which("docker"),
                "container",
                "inspect",
                "-f",
                "{{.State.StartedAt}}",
                self.cfg["head_container"],
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
        )
        return parse_docker_time(res.stdout) if res.returncode == 0 else None

    def check(self):
        """Every rank's launcher check; returns the refusals as 'host: reason'."""
        refusals = []
        for host, (rc, _out, err) in self.each(self.ranks, "check").items():
            if rc != 0:
                reason = err.splitlines()[-1] if err else f"rc={rc}"
                refusals.append("{}: {}".format(host, re.sub(r"^.*REFUSED: ", "", reason)))
        return refusals

    def wait_healthy(self, wait_s):
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if self.head_health() == 200:
                return True
            time.sleep(1)
        return False

    def restart(self, reason, wait_s):
        """The ordered restart. Returns (exit code, message)."""
        with flocked(self.cfg["lock_file"], self.cfg["lock_wait_s"]) as got:
            if not got:
                lock, wait = self.cfg["lock_file"], self.cfg["lock_wait_s"]
                return EX_BUSY, f"another cluster operation held {lock} for {wait} s"
            t0 = time.monotonic()
            self.log(f"restart requested ({reason}): checking every rank first")
            refusals = self.check()
            if refusals:
                msg = "REFUSED, nothing stopped: {}; fix: re-run site.yml".format(
                    "; ".join(refusals)
                )
                self.log(msg, "ERROR")
                return EX_REFUSED, msg
            stops = self.each(self.ranks, "stop", "--restart")
            failed = [
                "{}: {}".format(h, e or f"rc={rc}") for h, (rc, _o, e) in stops.items() if rc != 0
            ]
            if failed:
                msg = "stop failed: {}".format("; ".join(failed))
                self.log(msg, "ERROR")
                return EX_FAILED, msg
            self.log(f"stopped all {len(self.ranks)} ranks")
            for rank in [*list(reversed(self.workers)), self.head]:
                rc, _out, err = self.run(rank, "start")
                if rc != 0:
                    why = err or f"rc={rc}"
                    msg = f"start of {rank['host']} (rank {rank['rank']}) failed: {why}"
                    self.log(msg, "ERROR")
                    return EX_FAILED, msg
                self.log(f"started {rank['host']} (rank {rank['rank']})")
            if wait_s <= 0:
                return 0, "started every rank in %.1f s (not waiting for health)" % (
                    time.monotonic() - t0
                )
            if not self.wait_healthy(wait_s):
                msg = f"started every rank, but the head did not answer /health within {wait_s} s"
                self.log(msg, "ERROR")
                return EX_UNHEALTHY, msg
            msg = "healthy %.1f s after the restart began" % (time.monotonic() - t0)
            self.log(msg)
            return 0, msg

    def stop(self):
        with flocked(self.cfg["lock_file"], self.cfg["lock_wait_s"]) as got:
            if not got:
                return EX_BUSY, "another cluster operation holds the lock"
            res = self.each(self.ranks, "stop")
            failed = [f"{h}: {e}" for h, (rc, _o, e) in res.items() if rc != 0]
            self.log(
                "deliberate stop of every rank"
                + (": failed on " + "; ".join(failed) if failed else "")
            )
            return (EX_FAILED, "; ".join(failed)) if failed else (0, "stopped")


class Watchdog:
    def __init__(self, cfg, log):
        self.cfg, self.log = cfg, log
        self.cluster = Cluster(cfg, Log(cfg["cluster_log"], "sparkfleet-cluster"))
        wd = cfg["watchdog"]
        self.wd = wd
        self.state_file = os.path.join(wd["state_dir"], "state.json")
        self.paused = os.path.join(wd["state_dir"], "paused")
        self.gave_up = os.path.join(wd["state_dir"], "gave-up")

    def observe(self):
        head = self.cluster.head
        states = self.cluster.states()
        obs = {
            "head": {
                "host": head["host"],
                "state": states[head["host"]],
                "started_at": self.cluster.head_started_at(),
                "health": self.cluster.head_health(),
            },
            "workers": [
                {"host": w["host"], "rank": w["rank"], "state": states[w["host"]]}
                for w in self.cluster.workers
            ],
        }
        return obs

    def save(self, state):
        os.makedirs(self.wd["state_dir"], mode=0o755, exist_ok=True)
        state["restarts"] = state.get("restarts", [])[-50:]
        write_json(self.state_file, state)

    def decide(self, state, decision, reason, now, **extra):
        state["last_decision"] = dict(
            {"time": now, "at": iso(now), "decision": decision, "reason": reason}, **extra
        )
        level = (
            "ERROR"
            if decision in ("give-up", "restart-failed")
            else "WARNING"
            if decision == "restart"
            else "INFO"
        )
        self.log(f"decision={decision}: {reason}", level)

    def evidence(self, kind, reason, obs, now):
        """Every rank's engine log tail and the patched watchdog's stack dumps."""
        root = self.wd["incident_dir"]
        path = os.path.join(root, time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now)) + "-" + kind)
        os.makedirs(path, mode=0o750, exist_ok=True)
        write_json(
            os.path.join(path, "observation.json"),
            {"kind": kind, "reason": reason, "observation": obs},
            0o640,
        )
        tails = self.cluster.each(self.cluster.ranks, "tail", str(self.wd["log_tail_lines"]))
        for host, (rc, out, err) in tails.items():
            with open(
                os.open(os.path.join(path, host + ".log"), os.O_WRONLY | os.O_CREAT, 0o640), "w"
            ) as fh:
                fh.write(out + "\n" if rc == 0 else f"could not read the log: rc={rc} {err}\n")
            stacks = stack_section(out.splitlines()) if rc == 0 else []
            if stacks:
                with open(
                    os.open(os.path.join(path, host + ".stacks"), os.O_WRONLY | os.O_CREAT, 0o640),
                    "w",
                ) as fh:
                    fh.write("\n".join(stacks) + "\n")
        incidents = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
        for old in incidents[: max(0, len(incidents) - self.wd["incidents_keep"])]:
            shutil.rmtree(os.path.join(root, old), ignore_errors=True)
        return path

    def run(self):
        wd = self.wd
        with flocked(os.path.join(self.cfg["run_dir"], "watchdog.lock")) as got:
            if not got:
                self.log(f"another watchdog run holds the lock; this one exits (rc {EX_BUSY})")
                return EX_BUSY
            start = time.monotonic()
            state = read_json(self.state_file, {})
            while True:
                rc = self.once(state)
                if rc is not None:
                    return rc
                if time.monotonic() - start + wd["interval_s"] > wd["run_budget_s"]:
                    return 0
                time.sleep(wd["interval_s"])

    def once(self, state):
        """One observation and its decision; returns an exit code to end the run, or None."""
        wd = self.wd
        now = utcnow()
        if os.path.exists(self.gave_up):
            self.note(
                state,
                "gave-up",
                f"gave up earlier: {_first_line(self.gave_up)}; "
                "clear with: sparkfleet-watchdog clear",
                now,
            )
            self.save(state)
            return 0
        if os.path.exists(self.paused):
            self.note(
                state,
                "paused",
                f"paused ({_first_line(self.paused)}); resume with: sparkfleet-watchdog resume",
                now,
            )
            self.save(state)
            return 0
        with flocked(self.cfg["lock_file"]) as free:
            busy = not free
        if busy:
            self.note(
                state,
                "busy",
                "a cluster operation (site.yml, restart.yml) holds the lock; not observing",
                now,
            )
            self.save(state)
            return None
        obs = self.observe()
        kind, reason = classify(obs, wd["grace_s"], now)
        count = note_observation(state, kind, now, wd["interval_s"])
        self.note(state, kind, reason, now)
        if kind not in BAD or count < wd["confirm"]:
            self.save(state)
            return None
        verdict, why = gate_restart(state, wd, now)
        if verdict == "backoff":
            self.decide(state, "backoff", f"{reason}: {why}", now)
            self.save(state)
            return 0
        if verdict == "give-up":
            self.give_up(state, f"{reason}: {why}", now)
            return 0
        first = state["bad"]["first"]
        incident = self.evidence(kind, reason, obs, now)
        self.decide(
            state,
            "restart",
            f"{reason} ({count} bad observations since {iso(first)}); evidence in {incident}",
            now,
            kind=kind,
            detected_at=first,
        )
        self.save(state)
        rc, msg = self.cluster.restart("watchdog: " + kind, wd["boot_wait_s"])
        done = utcnow()
        entry = {
            "time": now,
            "at": iso(now),
            "kind": kind,
            "reason": reason,
            "detected_at": first,
            "rc": rc,
        }
        state.pop("bad", None)
        if rc == EX_REFUSED:
            self.give_up(state, f"a launcher refused to start: {msg}", done)
            return 0
        if rc == 0:
            entry["healthy_at"] = done
            entry["decision_to_healthy_s"] = round(done - now, 1)
            entry["detection_to_healthy_s"] = round(done - first, 1)
            self.decide(
                state,
                "recovered",
                f"{msg}; {done - now:.1f} s after the decision, "
                f"{done - first:.1f} s after the first bad observation",
                done,
            )
        else:
            self.decide(state, "restart-failed", msg, done, rc=rc)
        state.setdefault("restarts", []).append(entry)
        self.save(state)
        return 0

    def note(self, state, kind, reason, now):
        """Log an observation when it differs from the previous one (kind and reason)."""
        last = state.get("last_observation", {})
        if last.get("kind") != kind or (
            kind not in ("healthy", "booting", "busy") and last.get("reason") != reason
        ):
            level = "WARNING" if kind in BAD or kind in ("unreachable", "unknown") else "INFO"
            self.log(f"observed {kind}: {reason}", level)
        state["last_observation"] = {"time": now, "at": iso(now), "kind": kind, "reason": reason}

    def give_up(self, state, reason, now):
        os.makedirs(self.wd["state_dir"], mode=0o755, exist_ok=True)
        with open(self.gave_up, "w", encoding="utf-8") as fh:
            fh.write(
                f"{iso(now)} {reason}\n"
                "fix the cause (re-run site.yml), then: sparkfleet-watchdog clear\n"
            )
        self.decide(
            state,
            "give-up",
            "GAVE UP, no more restarts until an operator clears it: " + reason,
            now,
        )
        self.save(state)

    def summary(self):
        state = read_json(self.state_file, {})
        now = utcnow()
        return {
            "paused": _first_line(self.paused) if os.path.exists(self.paused) else None,
            "gave_up": _first_line(self.gave_up) if os.path.exists(self.gave_up) else None,
            "last_observation": state.get("last_observation"),
            "last_decision": state.get("last_decision"),
            "restarts_in_window": len(restarts_in_window(state, self.wd["window_s"], now)),
            "window_s": self.wd["window_s"],
            "restarts": state.get("restarts", [])[-5:],
        }


def _first_line(path):
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.readline().strip() or "no reason given"
    except OSError:
        return "unreadable"


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in ("cluster", "watchdog"):
        sys.stderr.write("usage: sparkfleet_cluster.py cluster|watchdog ARGS\n")
        return 2
    with open(CONFIG, encoding="utf-8") as fh:
        cfg = json.load(fh)
    if argv[0] == "watchdog":
        return watchdog_main(cfg, argv[1:])
    return cluster_main(cfg, argv[1:])


def cluster_main(cfg, argv):
    parser = argparse.ArgumentParser(
        prog="sparkfleet-cluster", description="Ordered control of the whole cluster."
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("status", help="every rank's launcher state (JSON)")
    sub.add_parser("check", help="every rank's launcher checks")
    restart = sub.add_parser(
        "restart", help="check all, stop all, start workers N-1..1, then the head"
    )
    restart.add_argument("--reason", default="operator")
    restart.add_argument(
        "--wait", type=int, default=0, help="seconds to wait for the head's /health (0: do not)"
    )
    sub.add_parser("stop", help="deliberately stop every rank (the watchdog leaves it alone)")
    args = parser.parse_args(argv)
    cluster = Cluster(cfg, Log(cfg["cluster_log"], "sparkfleet-cluster", echo=args.cmd != "status"))
    if args.cmd == "status":
        print(json.dumps(cluster.states(), indent=2, sort_keys=True))
        return 0
    if args.cmd == "check":
        refusals = cluster.check()
        for line in refusals:
            print(line, file=sys.stderr)
        return EX_REFUSED if refusals else 0
    if args.cmd == "stop":
        rc, msg = cluster.stop()
    else:
        rc, msg = cluster.restart(args.reason, args.wait)
    print(msg, file=sys.stderr if rc else sys.stdout)
    return rc


def watchdog_main(cfg, argv):
    parser = argparse.ArgumentParser(
        prog="sparkfleet-watchdog", description="Self-healing watchdog (cron)."
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("run", help="observe for up to a minute and act (cron)")
    sub.add_parser("status", help="paused, gave-up, last decision, restarts in the window (JSON)")
    pause = sub.add_parser("pause", help="hold every action until resume")
    pause.add_argument("reason", nargs="*")
    sub.add_parser("resume", help="remove the pause file")
    sub.add_parser("clear", help="clear a give-up and the restart history (after fixing the cause)")
    args = parser.parse_args(argv)
    wd = Watchdog(cfg, Log(cfg["watchdog"]["log_file"], "sparkfleet-watchdog"))
    if args.cmd == "run":
        return wd.run()
    if args.cmd == "status":
        print(json.dumps(wd.summary(), indent=2, sort_keys=True))
        return 0
    os.makedirs(cfg["watchdog"]["state_dir"], mode=0o755, exist_ok=True)
    who = os.environ.get("SUDO_USER") or os.environ.get("USER") or "root"
    if args.cmd == "pause":
        with open(wd.paused, "w", encoding="utf-8") as fh:
            fh.write(
                "{} by {}: {}\n".format(iso(utcnow()), who, " ".join(args.reason) or "operator")
            )
        wd.log("paused by {}: {}".format(who, " ".join(args.reason) or "operator"))
    elif args.cmd == "resume":
        if os.path.exists(wd.paused):
            os.unlink(wd.paused)
            wd.log(f"resumed by {who}")
    else:
        had = os.path.exists(wd.gave_up)
        if had:
            os.unlink(wd.gave_up)
        state = read_json(wd.state_file, {})
        state["restarts"] = []
        state.pop("bad", None)
        wd.save(state)
        wd.log(f"{'give-up and ' if had else ''}restart history cleared by {who}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
