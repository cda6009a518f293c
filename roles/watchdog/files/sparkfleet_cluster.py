# Copyright: sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Cluster control and self-healing watchdog of one sparkfleet SGLang cluster.

Installed on the head (rank 0) by the role sparkfleet.serving.watchdog, with two
wrappers that run it as `python3 sparkfleet_cluster.py cluster|watchdog ARGS`:

  sparkfleet-cluster status|check|restart|stop|start
      The one ordered restart of the cluster: check that every rank can start
      (nothing is stopped otherwise), stop every rank, start the workers from
      rank N-1 down to 1, the head last, wait for the head's /health. The
      bring-up of site.yml, restart.yml and the watchdog all call it; the canary
      stops and starts its production engine with it (a compose driver when that
      engine is a compose project: SPARKFLEET_CLUSTER_DRIVER names a file with it).
      Workers are reached over SSH with a key that can run only their launcher's
      verbs (and the production program's).

  sparkfleet-watchdog run|status|pause|resume|hold|release|clear
      Run by cron every minute; observes the cluster several times inside its
      minute and restarts it (through the code above) after two consecutive bad
      observations: a crashed rank (container missing or exited), or a head that
      is up but has not answered /health for longer than the grace period (a
      wedge). A healthy or booting cluster, a deliberate stop, a paused watchdog,
      a hold (site.yml changing the cluster; it ends by itself) or a cluster
      operation in progress is left alone. So is a cluster with a
      node that does not answer (a reboot, a cut cable): it waits until every
      node answers again, then restarts what is gone; a node gone longer than a
      bound is reported, never given up on. A run keeps observing after a
      restart for the rest of its minute. Restarts back off and are bounded per
      window; past the bound, or when a launcher refuses to start, the watchdog
      gives up (a marker file) until an operator clears it. A refusal by a node
      that booted less than boot_window_s ago (its port not up yet) is a
      transient: backed off and retried, never given up on.

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

# The collection's one HTTP client of the SGLang API (plugins/module_utils/_health.py, the
# same code as the sglang_health module) and its node_exporter textfile writer
# (_textfile.py, the launcher's too), installed beside this file by the role.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import _health
    import _textfile
except ImportError:  # the checkout's unit tests import this file from roles/watchdog/files
    from ansible_collections.sparkfleet.serving.plugins.module_utils import _health, _textfile

CONFIG = os.environ.get("SPARKFLEET_CLUSTER_CONFIG", "/etc/sparkfleet/cluster.json")
# A file of keys that replace the description's for one `sparkfleet-cluster` call: another
# engine on the same ranks (the canary's compose production). Only these keys.
DRIVER = os.environ.get("SPARKFLEET_CLUSTER_DRIVER", "")
DRIVER_KEYS = ("driver", "command_timeout_s", "health_url")

EX_REFUSED = 3  # a launcher refused to start: nothing was stopped
EX_FAILED = 4  # a stop or start failed part-way
EX_UNHEALTHY = 5  # started, but the head did not answer /health in time
EX_UNREACHABLE = 6  # a node did not answer over SSH: a transient, never a refusal
EX_MEMORY = 7  # stopped, but a node has less memory available than the engine needs: no start
EX_BOOTING = 8  # refused only by nodes within boot_window_s of their boot: a transient
EX_BUSY = 75  # another run holds the lock (EX_TEMPFAIL)
# The fix a refusal names: the run that provisions the cluster, from the operator's controller.
RERUN_SITE = "ansible-playbook sparkfleet.serving.site -i <inventory>"

# Launcher states (sparkfleet-sglang status) that mean the rank's engine is gone.
GONE = ("absent", "exited", "dead", "created", "removing")
# A running ordered restart, start or stop writes its progress here (in run_dir): phase,
# ranks stopped and started, since when the head is awaited. `sparkfleet-cluster progress`
# prints it with one line; a playbook that runs the operation in the background prints
# that line every round (the cluster role's entry point follow).
PROGRESS_FILE = "cluster-progress.json"
# While the head's /health is awaited, every rank's state is read this often (seconds):
# a rank whose container exited ends the wait at once, quoting this many of its log lines.
RANK_WATCH_S = 5
EXITED_TAIL_LINES = 20
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
# What ssh(1) and a timed-out command return: the node did not answer.
NO_ANSWER = (255, 124)

# The patched SGLang watchdog (HARDEN-PATCH watchdog_stack_dump) logs this line
# before every thread's stack; upstream's own timeout line names the watchdog.
STACK_START = re.compile(r"Python stacks of all \d+ threads|watchdog timeout", re.IGNORECASE)


class Clock:
    """Wall time, monotonic time and sleep in one object (tests pass a fake one)."""

    @staticmethod
    def time():
        return time.time()

    @staticmethod
    def monotonic():
        return time.monotonic()

    @staticmethod
    def sleep(seconds):
        time.sleep(seconds)


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


def booted_ago(out):
    """The uptime_s=N a refusing launcher printed (seconds since its node booted), or None."""
    found = re.search(r"^uptime_s=(\d+(?:\.\d+)?)$", out or "", re.MULTILINE)
    return float(found.group(1)) if found else None


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
            confirm_after = min(wd.get("confirm_after_s", wd["interval_s"]), wd["interval_s"])
            return min(max(confirm_after, left), wd["interval_s"])
    return wd["interval_s"]


def progress_line(p, now, alive=True):
    """One line of a cluster operation's progress (what `sparkfleet-cluster progress` prints).

    p: the progress file (Cluster.note): op, reason, began, phase, ranks (in start order),
    stopped, started, starting, waiting_since, wait_s, head, log; rc and message once ended.
    alive: whether the process that writes it still runs (a killed run never ends its file).
    """
    if not p.get("op"):
        return "no cluster operation recorded yet"
    what = p["op"] + (f" ({p['reason']})" if p.get("reason") else "")
    if p.get("phase") in ("done", "failed"):
        took = p.get("ended", now) - p["began"]
        verdict = "ended" if p["phase"] == "done" else f"FAILED (rc {p.get('rc')})"
        return f"{what} {verdict} after {took:.0f} s: {p.get('message', '')}"
    n, head = len(p.get("ranks", [])), p.get("head", "the head")
    counts = []
    if p["op"] != "start":
        counts.append(f"{len(p.get('stopped', []))}/{n} ranks stopped")
    if p["op"] != "stop":
        started = p.get("started", [])
        counts.append(
            f"{len(started)}/{n} started" + (f" ({', '.join(started)})" if started else "")
        )
    phase = p.get("phase")
    if phase == "wait":
        doing = (
            f"waiting for {head}'s /health for {now - p['waiting_since']:.0f} s "
            f"(up to {p.get('wait_s')} s)"
        )
    elif phase == "start":
        doing = f"starting {p['starting']}" if p.get("starting") else "starting"
    else:
        doing = {
            "check": "checking every rank's launcher (nothing stopped yet)",
            "stop": "stopping every rank",
            "memcheck": "checking every node's memory before the start",
        }.get(phase, phase or "")
    line = f"{what}, {now - p['began']:.0f} s: {', '.join(counts)}; {doing}"
    if not alive:
        line += f"; its process {p.get('pid')} is gone (killed?)"
    return line + (f"; follow {p['log']} on {head}" if p.get("log") else "")


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
        line = f"{iso(Clock.time())} {self.name} {level}: {msg}\n"
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


# What runs a rank's verbs (start, stop, status, check, memcheck, tail): its driver.
# "launcher": this collection's engine launcher on every node (cfg["launcher"]); the
# workers' forced command runs the verb itself. "compose": another production engine,
# a docker compose project per node (the canary's production), run by the program the
# driver names on every node (installed by the canary role); the workers' forced command
# runs it for the verbs prefixed with "production".
DRIVERS = {"launcher": (), "compose": ("production",)}
# Start orders: the cluster's own is workers N-1..1, then the head (rank 0 joins last);
# a compose production may be described head first.
ORDERS = ("workers_first", "head_first")


def driver_of(cfg):
    """(kind, local program, remote verb prefix, start order) of a cluster description."""
    driver = cfg.get("driver") or {"kind": "launcher"}
    kind = driver.get("kind", "launcher")
    if kind not in DRIVERS:
        raise ValueError(f"driver {kind!r} is not one of {', '.join(DRIVERS)}")
    order = driver.get("order", "workers_first")
    if order not in ORDERS:
        raise ValueError(f"driver order {order!r} is not one of {', '.join(ORDERS)}")
    program = cfg.get("launcher") if kind == "launcher" else driver["program"]
    return kind, program, DRIVERS[kind], order


def with_driver(cfg, path):
    """The description with the keys of a driver file over it (the ranks, SSH and lock stay
    the cluster's own: the file never copies them)."""
    if not path:
        return cfg
    with open(path, encoding="utf-8") as fh:
        overlay = json.load(fh)
    unknown = sorted(set(overlay) - set(DRIVER_KEYS))
    if unknown:
        raise ValueError(f"{path}: {', '.join(unknown)} not one of {', '.join(DRIVER_KEYS)}")
    return {**cfg, **overlay}


class Cluster:
    """The ranks of one cluster, driven through each node's launcher (or another driver)."""

    def __init__(self, cfg, log, clock=Clock):
        self.cfg, self.log, self.clock = cfg, log, clock
        self.ranks = sorted(cfg["ranks"], key=lambda r: r["rank"])
        self.head = self.ranks[0]
        self.workers = self.ranks[1:]
        self.driver, self.program, self.remote_prefix, self.order = driver_of(cfg)
        self.progress = {}

    def progress_path(self):
        """Where this cluster's operations write their progress (None: nowhere)."""
        run_dir = self.cfg.get("run_dir") or os.path.dirname(self.cfg.get("lock_file") or "")
        return os.path.join(run_dir, PROGRESS_FILE) if run_dir else None

    def note(self, **changes):
        """Record the operation's progress, written whole and renamed (a reader never sees
        half a file). A file that cannot be written never stops the operation."""
        self.progress.update(changes)
        path = self.progress_path()
        if not path:
            return
        try:
            os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
            write_json(path, self.progress)
        except OSError as exc:
            self.log(f"cannot write the progress file {path}: {exc}", "WARNING")

    def begin(self, op, reason, phase):
        """A new operation's progress (called with the cluster lock held)."""
        self.progress = {}
        self.note(
            op=op,
            reason=reason,
            pid=os.getpid(),
            began=self.clock.time(),
            phase=phase,
            head=self.head["host"],
            ranks=[r["host"] for r in self.start_order()],
            stopped=[],
            started=[],
            log=self.cfg.get("cluster_log") or "",
        )

    def finish(self, rc, msg):
        """The operation's outcome in its progress file; returns (rc, msg)."""
        self.note(
            phase="done" if rc == 0 else "failed", rc=rc, message=msg, ended=self.clock.time()
        )
        return rc, msg

    def start_order(self):
        """The ranks in the order they start: workers N-1..1 then the head, or the reverse."""
        ranks = [*reversed(self.workers), self.head]
        return ranks if self.order == "workers_first" else list(reversed(ranks))

    def stop_waves(self):
        """The ranks in the order a deliberate stop takes them: the head alone first (its API
        takes no new request while the workers still run), then every worker at once."""
        return [[self.head], self.workers] if self.workers else [[self.head]]

    def run(self, rank, *verb, timeout=None):
        """(rc, stdout, stderr) of the driver's verb on that rank."""
        if rank["rank"] == 0:
            argv = [self.program, *verb]
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
                " ".join([*self.remote_prefix, *verb]),
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

    def each(self, ranks, *verb, timeout=None):
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(ranks))) as pool:
            return dict(
                zip(
                    [r["host"] for r in ranks],
                    pool.map(lambda r: self.run(r, *verb, timeout=timeout), ranks),
                )
            )

    def no_answer(self, host, rc):
        """Did this rank's node not answer (SSH failed or timed out)? The head runs locally."""
        return rc in NO_ANSWER and host != self.head["host"]

    def states(self, ranks=None):
        out = {}
        # status reads two docker inspects: a node that takes longer does not answer.
        timeout = self.cfg["ssh"]["connect_timeout_s"] + 10
        for host, (rc, stdout, stderr) in self.each(
            ranks or self.ranks, "status", timeout=timeout
        ).items():
            if self.no_answer(host, rc):
                out[host] = "unreachable: " + (stderr.splitlines() or ["ssh failed"])[-1]
            elif rc != 0:
                out[host] = f"unknown: rc={rc} {stderr}"
            else:
                out[host] = stdout or "unknown"
        return out

    def head_client(self):
        """The collection's SGLang client for the head's API (raises ValueError on a bad URL)."""
        base = self.cfg["health_url"].rsplit(_health.HEALTH_PATH, 1)[0]
        return _health.SGLangClient(base, request_timeout=self.cfg["health_timeout_s"])

    def head_health(self):
        """The head's /health status code, 0 when it does not answer."""
        try:
            return self.head_client().request("GET", _health.HEALTH_PATH).status
        except (_health.TransportError, ValueError):
            return 0

    def head_progress(self):
        """The head's decode progress from its /metrics (see _health.progress), or None."""
        try:
            return _health.progress(self.head_client())
        except ValueError:
            return None

    def memory(self):
        """Every rank's memory check (after the stop): the shortfalls as 'host: reason'."""
        short = []
        for host, (rc, out, err) in self.each(self.ranks, "memcheck").items():
            if rc != 0 and not self.no_answer(host, rc):
                reason = (err or out).splitlines()[-1] if (err or out) else f"rc={rc}"
                reason = re.sub(r"^.*REFUSED: ", "", reason)
                short.append(reason if reason.startswith(host + ": ") else f"{host}: {reason}")
        return short

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
        """Every rank's launcher check: (refusals as 'host: reason', every result, booting).

        ``booting``: every refusing node booted less than boot_window_s ago (its launcher
        prints uptime_s=N before refusing): a port not up yet, not a broken node.
        """
        results = self.each(self.ranks, "check")
        refusals, booting = [], True
        window = int(self.cfg.get("boot_window_s") or 0)
        for host, (rc, out, err) in results.items():
            if rc != 0 and not self.no_answer(host, rc):
                reason = err.splitlines()[-1] if err else f"rc={rc}"
                reason = re.sub(r"^.*REFUSED: ", "", reason)
                uptime = booted_ago(out)
                if uptime is not None and uptime < window:
                    reason += f" (booted {uptime:.0f} s ago)"
                else:
                    booting = False
                refusals.append(f"{host}: {reason}")
        return refusals, results, booting and bool(refusals)

    def wait_healthy(self, wait_s):
        """Wait up to wait_s for the head's /health 200: None, or why the wait ended early.

        Every rank's state is read every RANK_WATCH_S meanwhile (the launcher's status, the
        watchdog's read): a rank whose container exited ends the wait at once, naming it with
        the last lines of its engine log, instead of waiting out wait_s for a head that can
        no longer answer. A rank that is slow but running, or a node that does not answer
        for a moment, is waited for.
        """
        deadline = self.clock.monotonic() + wait_s
        watch = float(self.cfg.get("rank_watch_s", RANK_WATCH_S))
        look = self.clock.monotonic()
        self.note(phase="wait", waiting_since=self.clock.time(), wait_s=wait_s)
        while self.clock.monotonic() < deadline:
            if self.head_health() == 200:
                return None
            if self.clock.monotonic() >= look:
                gone = self.exited()
                if gone:
                    return gone
                look = self.clock.monotonic() + watch
            self.clock.sleep(1)
        return ""

    def exited(self):
        """'host (rank N) is exited ...: <its last log lines>' for every rank gone, or ''."""
        states = self.states()
        gone = [r for r in self.ranks if states.get(r["host"]) in GONE]
        if not gone:
            return ""
        tails = self.each(gone, "tail", str(EXITED_TAIL_LINES))
        parts = []
        for rank in gone:
            rc, out, err = tails[rank["host"]]
            lines = out if rc == 0 and out else f"(no log lines: {err or f'rc={rc}'})"
            parts.append(
                f"{rank['host']} (rank {rank['rank']}) is {states[rank['host']]} while the "
                f"head's /health was awaited; the last {EXITED_TAIL_LINES} lines of its engine "
                f"log:\n{lines}"
            )
        return "\n".join(parts)

    def unreached(self, step, results):
        """(EX_UNREACHABLE, message) when a node did not answer during a step, else None."""
        lost = [
            "{}: {}".format(host, (err.splitlines() or [f"rc={rc}"])[-1])
            for host, (rc, _out, err) in results.items()
            if self.no_answer(host, rc)
        ]
        if not lost:
            return None
        msg = (
            f"cannot reach {'; '.join(lost)} during the {step}"
            + (", nothing stopped" if step == "check" else "")
            + "; a transient: retried when every node answers"
        )
        self.log(msg, "WARNING")
        return EX_UNREACHABLE, msg

    def only_stop_start(self):
        """(EX_REFUSED, message) when the driver runs no launcher checks (compose), else None."""
        if self.driver == "launcher":
            return None
        return EX_REFUSED, (
            f"the {self.driver} driver stops and starts its engine only (stop, start): "
            "check and restart run the collection's launcher checks"
        )

    def restart(self, reason, wait_s):
        """The ordered restart. Returns (exit code, message); its outcome goes to the textfile."""
        refused = self.only_stop_start()
        if refused:
            return refused
        started, t0 = self.clock.time(), self.clock.monotonic()
        rc, msg = self._restart(reason, wait_s)
        if rc != EX_BUSY:
            self.export(reason, rc, started, self.clock.monotonic() - t0)
        return rc, msg

    def export(self, reason, rc, started, took):
        """The last restart's outcome, as a node_exporter textfile (what each rank then runs is
        its own launcher's textfile, sparkfleet_rank.prom)."""
        directory = (self.cfg.get("watchdog") or {}).get("textfile_dir") or ""
        if not directory:
            return
        text = _textfile.metrics_text(
            [
                (
                    "last_restart_timestamp_seconds",
                    "gauge",
                    "When the last ordered restart began.",
                    [({}, started)],
                ),
                (
                    "last_restart_duration_seconds",
                    "gauge",
                    "How long it took (to the head's /health 200 when it waited for it).",
                    [({}, took)],
                ),
                (
                    "last_restart_exit_code",
                    "gauge",
                    "Its exit code: 0 ok, 3 refused, 4 failed, 5 unhealthy, 6 a node unreachable, "
                    "7 reboot required, 8 a node not ready after its boot; by: who asked for it.",
                    [({"by": reason.split(":", 1)[0].strip() or "operator"}, rc)],
                ),
            ],
            "sparkfleet_cluster_",
        )
        write_textfile(directory, "sparkfleet_cluster.prom", text, self.log)

    def _restart(self, reason, wait_s):
        with flocked(self.cfg["lock_file"], self.cfg["lock_wait_s"]) as got:
            if not got:
                lock, wait = self.cfg["lock_file"], self.cfg["lock_wait_s"]
                return EX_BUSY, f"another cluster operation held {lock} for {wait} s"
            self.begin("restart", reason, "check")
            return self.finish(*self._restart_locked(reason, wait_s))

    def _restart_locked(self, reason, wait_s):
        """The ordered restart with the lock held: check, stop, memory, start, wait."""
        t0 = self.clock.monotonic()
        self.log(f"restart requested ({reason}): checking every rank first")
        refusals, results, booting = self.check()
        lost = self.unreached("check", results)
        if lost:
            return lost
        if booting:
            msg = (
                "not ready after a boot, nothing stopped: {}; a transient "
                "(boot_window_s={}): retried".format(
                    "; ".join(refusals), self.cfg.get("boot_window_s")
                )
            )
            self.log(msg, "WARNING")
            return EX_BOOTING, msg
        if refusals:
            msg = "REFUSED, nothing stopped: {}; fix: re-run {}".format(
                "; ".join(refusals), RERUN_SITE
            )
            self.log(msg, "ERROR")
            return EX_REFUSED, msg
        self.note(phase="stop")
        stops = self.each(self.ranks, "stop", "--restart")
        lost = self.unreached("stop", stops)
        if lost:
            return lost
        failed = [
            "{}: {}".format(h, e or f"rc={rc}") for h, (rc, _o, e) in stops.items() if rc != 0
        ]
        if failed:
            msg = "stop failed: {}".format("; ".join(failed))
            self.log(msg, "ERROR")
            return EX_FAILED, msg
        self.log(f"stopped all {len(self.ranks)} ranks")
        self.note(phase="memcheck", stopped=list(self.progress.get("ranks", [])))
        # A crashed engine's memory may not come back (GB10 unified memory): starting
        # into it loops until the node stops answering. Nothing starts then.
        short = self.memory()
        if short:
            # Each line names its node, the figures and the fix (the launcher's memcheck).
            msg = "REBOOT REQUIRED, nothing started: " + "; ".join(short)
            self.log(msg, "ERROR")
            return EX_MEMORY, msg
        return self._start(wait_s, t0, "restart")

    def _start(self, wait_s, t0, what):
        """Start every rank in the start order, one at a time, then wait for the head."""
        self.note(phase="start")
        for rank in self.start_order():
            self.note(starting=rank["host"])
            rc, _out, err = self.run(rank, "start")
            lost = self.unreached("start", {rank["host"]: (rc, _out, err)})
            if lost:
                return lost
            if rc != 0:
                why = err or f"rc={rc}"
                msg = f"start of {rank['host']} (rank {rank['rank']}) failed: {why}"
                self.log(msg, "ERROR")
                return EX_FAILED, msg
            self.log(f"started {rank['host']} (rank {rank['rank']})")
            self.note(started=[*self.progress.get("started", []), rank["host"]], starting=None)
        if wait_s <= 0:
            took, order = (
                self.clock.monotonic() - t0,
                " -> ".join(r["host"] for r in self.start_order()),
            )
            return 0, f"started every rank in {took:.1f} s ({order}; not waiting for health)"
        ended = self.wait_healthy(wait_s)
        if ended:
            self.log(ended, "ERROR")
            return EX_FAILED, ended
        if ended is not None:
            msg = f"started every rank, but the head did not answer /health within {wait_s} s"
            self.log(msg, "ERROR")
            return EX_UNHEALTHY, msg
        msg = f"healthy {self.clock.monotonic() - t0:.1f} s after the {what} began"
        self.log(msg)
        return 0, msg

    def start(self, wait_s):
        """Start a stopped cluster in its order (after a deliberate stop: the canary's restore)."""
        with flocked(self.cfg["lock_file"], self.cfg["lock_wait_s"]) as got:
            if not got:
                return EX_BUSY, "another cluster operation holds the lock"
            self.begin("start", "", "start")
            self.log(f"start of every rank ({self.driver} driver, {self.order})")
            return self.finish(*self._start(wait_s, self.clock.monotonic(), "start"))

    def stop(self):
        with flocked(self.cfg["lock_file"], self.cfg["lock_wait_s"]) as got:
            if not got:
                return EX_BUSY, "another cluster operation holds the lock"
            self.begin("stop", "", "stop")
            # The head first, then the workers; a wave that fails ends the stop there (the
            # ranks after it keep running, named in the message).
            res = {}
            for wave in self.stop_waves():
                res.update(self.each(wave, "stop"))
                lost = self.unreached("stop", res)
                if lost:
                    return self.finish(*lost)
                if any(rc != 0 for rc, _o, _e in res.values()):
                    break
                self.log("stopped " + ", ".join(f"{r['host']} (rank {r['rank']})" for r in wave))
            failed = [f"{h}: {e or f'rc={rc}'}" for h, (rc, _o, e) in res.items() if rc != 0]
            left = [r["host"] for r in self.ranks if r["host"] not in res]
            if left:
                failed.append("not stopped after that: " + ", ".join(left))
            self.log(
                f"deliberate stop of every rank ({self.driver} driver)"
                + (": failed on " + "; ".join(failed) if failed else "")
            )
            self.note(stopped=[h for h, (rc, _o, _e) in res.items() if rc == 0])
            return self.finish(*((EX_FAILED, "; ".join(failed)) if failed else (0, "stopped")))


def file_stamp(path):
    """What tells a rewritten file from the one read earlier (inode, mtime, size); None if gone."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


class Watchdog:
    def __init__(self, cfg, log, cluster=None, clock=Clock, config=None, make_cluster=None):
        self.log, self.clock = log, clock
        # (path, stamp) of the cluster description in use: when site.yml rewrites it (another
        # profile, port, node or bound), the run observes with the new one from its next
        # observation on, never judging the new cluster by the old description.
        self.config = config
        self.make_cluster = make_cluster or (
            lambda c: Cluster(c, Log(c["cluster_log"], "sparkfleet-cluster"), clock)
        )
        self.configure(cfg, cluster)

    def configure(self, cfg, cluster=None):
        self.cfg = cfg
        self.cluster = cluster or self.make_cluster(cfg)
        wd = cfg["watchdog"]
        self.unreachable_s = wd.get("unreachable_s", 900)
        self.wd = wd
        self.state_file = os.path.join(wd["state_dir"], "state.json")
        self.paused = os.path.join(wd["state_dir"], "paused")
        self.held = os.path.join(wd["state_dir"], "held")
        self.gave_up = os.path.join(wd["state_dir"], "gave-up")
        self.reboot = os.path.join(wd["state_dir"], REBOOT)
        # Written by playbooks/drill.yml while it injects a fault: the restarts that heal it
        # are labelled as a drill's (state.json, the log), not counted as the cluster's own.
        self.drill = os.path.join(wd["state_dir"], "drill")

    def observe(self):
        head = self.cluster.head
        states = self.cluster.states()
        health = self.cluster.head_health()
        obs = {
            "head": {
                "host": head["host"],
                "state": states[head["host"]],
                "started_at": self.cluster.head_started_at(),
                "health": health,
                # Read only from a head that answers /health: what /health hides.
                "progress": self.cluster.head_progress()
                if health == 200 and self.wd.get("stall_s", 0) > 0
                else None,
            },
            "workers": [
                {"host": w["host"], "rank": w["rank"], "state": states[w["host"]]}
                for w in self.cluster.workers
            ],
        }
        return obs

    def save(self, state):
        os.makedirs(self.wd["state_dir"], mode=0o755, exist_ok=True)
        # An operator's clear while this run observed (or restarted) holds: what this
        # run remembers from before it is dropped, not written back over it.
        cleared = read_json(self.state_file, {}).get("cleared_at")
        if cleared and cleared > state.get("cleared_at", 0):
            state["cleared_at"] = cleared
            state["restarts"] = [r for r in state.get("restarts", []) if r["time"] > cleared]
            if (state.get("bad") or {}).get("last", 0) <= cleared:
                state.pop("bad", None)
        state["restarts"] = state.get("restarts", [])[-50:]
        write_json(self.state_file, state)
        self.export(state)

    def decide(self, state, decision, reason, now, **extra):
        state["last_decision"] = dict(
            {"time": now, "at": iso(now), "decision": decision, "reason": reason}, **extra
        )
        level = (
            "ERROR"
            if decision in ("give-up", "restart-failed", REBOOT)
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
            start, started = self.clock.monotonic(), self.clock.time()
            while True:
                if not self.reload():
                    return 0
                # Read afresh each time: an operator's clear between two observations holds.
                state = read_json(self.state_file, {})
                rc = self.once(state)
                if rc is not None:
                    return rc
                pause = next_pause(state, wd)
                if not self.time_left(start, started, pause):
                    return 0
                self.clock.sleep(pause)

    def reload(self):
        """Take up a rewritten cluster description; False when it cannot be read (the run ends)."""
        if self.config is None:
            return True
        path, stamp = self.config
        now = file_stamp(path)
        if now == stamp:
            return True
        try:
            with open(path, encoding="utf-8") as fh:
                cfg = json.load(fh)
            if not isinstance(cfg, dict) or not isinstance(cfg.get("watchdog"), dict):
                raise ValueError("no watchdog settings in it")
        except (OSError, ValueError) as exc:
            self.log(f"{path} changed and cannot be read ({exc}); this run ends", "WARNING")
            return False
        self.config = (path, now)
        self.configure(cfg)
        self.log(f"{path} changed (site.yml): observing with the new description from now on")
        return True

    def time_left(self, start, started, pause):
        """Is there budget for one more observation after pause?

        Within the minute cron started this run in: run_budget_s from its start. A run
        that went past a minute boundary (a restart took its time) turned that
        minute's cron run away (busy), so it observes for it: until run_budget_s into
        the current minute, then the next cron run takes over.
        """
        now = self.clock.time()
        budget = self.wd["run_budget_s"]
        if now // 60 == started // 60:
            return self.clock.monotonic() - start + pause <= budget
        return now % 60 + pause <= budget

    def once(self, state):
        """One observation and its decision; returns an exit code to end the run, or None."""
        wd = self.wd
        now = self.clock.time()
        # Given up or paused: the run reads the marker again every interval (no node is
        # asked anything), so an operator's clear or resume is acted on within one
        # interval, not at the next cron minute.
        if os.path.exists(self.gave_up):
            self.note(
                state,
                "gave-up",
                f"gave up earlier: {_first_line(self.gave_up)}; "
                "clear with: sparkfleet-watchdog clear",
                now,
            )
            self.save(state)
            return None
        if os.path.exists(self.reboot):
            self.note(
                state,
                REBOOT,
                f"{_first_line(self.reboot)}; after the reboot: sparkfleet-watchdog clear",
                now,
            )
            self.save(state)
            return None
        if os.path.exists(self.paused):
            self.note(
                state,
                "paused",
                f"paused ({_first_line(self.paused)}); resume with: sparkfleet-watchdog resume",
                now,
            )
            self.save(state)
            return None
        hold = self.hold(now)
        if hold:
            # What was bad before the hold is not counted on after it: the run that
            # held the watchdog changed the cluster meanwhile.
            state.pop("bad", None)
            self.note(
                state,
                "held",
                f"held by {hold['by']} until {iso(hold['until'])}: {hold['reason']}; "
                "ends then by itself, or with: sparkfleet-watchdog release",
                now,
                key=f"{hold['by']}: {hold['reason']}",
            )
            self.save(state)
            return None
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
        stall = track_progress(
            state,
            obs["head"].get("progress") if kind == "healthy" else None,
            now,
            wd.get("stall_s", 0),
            wd["interval_s"],
        )
        if stall:
            kind, reason = WEDGED, f"head {obs['head']['host']} {stall}"
        elif kind == "healthy":
            state["last_healthy"] = now
        lost = unreachable_hosts(obs)
        for level, msg in track_unreachable(state, lost, now, self.unreachable_s):
            self.log(msg, level)
        count = note_observation(state, kind, now, wd["interval_s"])
        self.note(state, kind, reason, now, key=sorted(lost) if lost else None)
        # A stall is confirmed by its own duration (stall_s without a token).
        confirmed = count >= wd["confirm"] or stall is not None
        if kind not in BAD or not confirmed or settle_left(state, now, wd) > 0:
            self.save(state)
            return None
        verdict, why = gate_restart(state, wd, now)
        if verdict == "backoff":
            # Logged once per backoff, then observed on: the restart follows within
            # one interval of the backoff's end, in this run or the next.
            if (state.get("last_decision") or {}).get("decision") != "backoff":
                self.decide(state, "backoff", f"{reason}: {why}", now)
            self.save(state)
            return None
        if verdict == "give-up":
            self.give_up(state, f"{reason}: {why}", now)
            return None
        first = state["bad"]["first"]
        # A retry after a node refused within its boot window keeps that attempt's evidence:
        # the incident is the same one, and a port coming up late is not a new crash.
        last = (state.get("restarts") or [{}])[-1]
        incident = (
            last.get("incident")
            if last.get("booting")
            and now - last.get("time", 0) < int(self.cfg.get("boot_window_s") or 0)
            and os.path.isdir(last.get("incident") or "")
            else None
        ) or self.evidence(kind, reason, obs, now)
        if stall:
            state["last_stall"] = {"time": now, "at": iso(now), "reason": reason}
        drill = _first_line(self.drill) if os.path.exists(self.drill) else None
        self.decide(
            state,
            "restart",
            f"{reason} ({count} bad observations since {iso(first)}); evidence in {incident}"
            + (f" [drill {drill}]" if drill else ""),
            now,
            kind=kind,
            detected_at=first,
        )
        self.save(state)
        rc, msg = self.cluster.restart("watchdog: " + kind, wd["boot_wait_s"])
        done = self.clock.time()
        entry = {
            "time": now,
            "at": iso(now),
            "kind": kind,
            "reason": reason,
            "detected_at": first,
            "rc": rc,
            "incident": incident,
        }
        if drill:
            entry["drill"] = drill
        state.pop("bad", None)
        state.pop("progress", None)
        if rc not in (EX_UNREACHABLE, EX_BOOTING):
            state["restarts_total"] = state.get("restarts_total", 0) + 1
        if rc == EX_REFUSED:
            self.give_up(state, f"a launcher refused to start: {msg}", done)
            return None
        if rc == EX_MEMORY:
            state["last_memory"] = {"time": done, "at": iso(done), "ok": False, "reason": msg}
            self.reboot_required(state, msg, incident, done)
            state.setdefault("restarts", []).append(entry)
            self.save(state)
            return None
        if rc in (EX_UNREACHABLE, EX_BOOTING):
            # Not a refusal and not counted towards the give-up bound: the next
            # observations see the node unreachable and wait for it, or (a node that
            # refused within its boot window) retry after the backoff.
            entry["transient"] = True
            if rc == EX_BOOTING:
                entry["booting"] = True
            self.decide(state, "restart-deferred", msg, done, rc=rc)
        elif rc == 0:
            # Every rank started, so every node passed the memory check after the stop.
            state["last_memory"] = {
                "time": done,
                "at": iso(done),
                "ok": True,
                "reason": "every node had the memory its rank needs",
            }
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
        # Observe on for the rest of the run's budget: a second fault soon after a
        # recovery is seen within one interval, not at the next cron minute.
        return None

    def note(self, state, kind, reason, now, key=None):
        """Log an observation when it differs from the previous one.

        Differs: another kind, or for a bad or odd kind another reason (for
        unreachable: another set of nodes, key, not another SSH error text).
        """
        last = state.get("last_observation", {})
        key = reason if key is None else key
        if last.get("kind") != kind or (
            kind not in ("healthy", "booting", "busy")
            and last.get("key", last.get("reason")) != key
        ):
            level = "WARNING" if kind in BAD or kind in (UNREACHABLE, "unknown") else "INFO"
            self.log(f"observed {kind}: {reason}", level)
        state["last_observation"] = {
            "time": now,
            "at": iso(now),
            "kind": kind,
            "reason": reason,
            "key": key,
        }

    def give_up(self, state, reason, now):
        os.makedirs(self.wd["state_dir"], mode=0o755, exist_ok=True)
        with open(self.gave_up, "w", encoding="utf-8") as fh:
            fh.write(
                f"{iso(now)} {reason}\n"
                f"fix the cause (re-run {RERUN_SITE}), then: sparkfleet-watchdog clear\n"
            )
        self.decide(
            state,
            "give-up",
            "GAVE UP, no more restarts until an operator clears it: " + reason,
            now,
        )
        self.save(state)

    def reboot_required(self, state, reason, incident, now):
        """Stopped, and a node lacks the memory to start: no start until an operator clears."""
        os.makedirs(self.wd["state_dir"], mode=0o755, exist_ok=True)
        with open(self.reboot, "w", encoding="utf-8") as fh:
            fh.write(f"{iso(now)} {reason}\n")
        with open(
            os.open(os.path.join(incident, "memory.txt"), os.O_WRONLY | os.O_CREAT, 0o640), "w"
        ) as fh:
            fh.write(reason + "\n")
        self.decide(state, REBOOT, reason, now)

    def clear(self, who):
        """An operator's clear: the give-up or reboot-required marker and the restart history go."""
        had = False
        for marker in (self.gave_up, self.reboot):
            if os.path.exists(marker):
                os.unlink(marker)
                had = True
        state = read_json(self.state_file, {})
        state["restarts"] = []
        state.pop("bad", None)
        state["cleared_at"] = self.clock.time()
        self.save(state)
        self.log(f"{'give-up and ' if had else ''}restart history cleared by {who}")

    def hold(self, now, settle=True):
        """The hold in force (a dict), or None; one that has ended is removed and logged.

        A hold is what a run that changes the cluster (site.yml) takes before its first
        change and releases after its bring-up: the watchdog would otherwise judge a
        cluster half-way through a change (containers renamed, launch rendered but not
        started). It carries its own end, so a run killed half-way holds nothing for long.
        """
        hold = read_json(self.held, None)
        if hold is None and not os.path.exists(self.held):
            return None
        if isinstance(hold, dict) and isinstance(hold.get("until"), (int, float)):
            if now < hold["until"]:
                return {
                    "by": hold.get("by", "?"),
                    "reason": hold.get("reason", ""),
                    "until": hold["until"],
                }
            why = "held by {} ({}) until {}: ended without a release".format(
                hold.get("by", "?"), hold.get("reason", ""), iso(hold["until"])
            )
        else:
            why = f"{self.held} is not a hold this program wrote"
        if not settle:
            return None
        self.log(f"{why}; observing again", "WARNING")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.held)
        return None

    def take_hold(self, seconds, who, reason):
        """Hold every action for `seconds` from now (written whole, then renamed)."""
        now = self.clock.time()
        before = self.hold(now, settle=False)
        os.makedirs(self.wd["state_dir"], mode=0o755, exist_ok=True)
        hold = {"until": now + seconds, "at": iso(now), "by": who, "reason": reason}
        tmp = self.held + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(hold, fh)
        os.replace(tmp, self.held)
        # Logged when taken, not at every renewal of the same hold.
        if not before or (before["by"], before["reason"]) != (who, reason):
            self.log(f"held by {who} for {seconds} s: {reason}")

    def release(self, who):
        hold = read_json(self.held, None)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.held)
            self.log(
                "hold released by {}{}".format(
                    who, f" ({hold.get('reason', '')})" if isinstance(hold, dict) else ""
                )
            )

    def export(self, state):
        """The watchdog's state as a node_exporter textfile (written whole, then renamed)."""
        directory = self.wd.get("textfile_dir") or ""
        if not directory:
            return
        now = self.clock.time()
        last = state.get("last_observation") or {}
        restarts = state.get("restarts", [])
        done = [r for r in restarts if "detection_to_healthy_s" in r]
        lost = state.get(UNREACHABLE, {})
        prog = state.get("progress") or {}
        text = _textfile.metrics_text(
            [
                (
                    "last_run_timestamp_seconds",
                    "gauge",
                    "When the watchdog last wrote this file.",
                    [({}, now)],
                ),
                (
                    "observation",
                    "gauge",
                    "1 for the kind of the last observation, else 0.",
                    [({"kind": k}, int(last.get("kind") == k)) for k in KINDS],
                ),
                (
                    "last_observation_timestamp_seconds",
                    "gauge",
                    "When the cluster was last observed.",
                    [({}, last.get("time", 0))],
                ),
                (
                    "last_healthy_timestamp_seconds",
                    "gauge",
                    "When the cluster was last seen healthy.",
                    [({}, state.get("last_healthy", 0))],
                ),
                (
                    "restarts_total",
                    "counter",
                    "Restarts the watchdog made (a restart that could "
                    "not reach a node is not counted).",
                    [({}, state.get("restarts_total", 0))],
                ),
                (
                    "restarts_in_window",
                    "gauge",
                    "Restarts counted against the bound now.",
                    [({}, len(restarts_in_window(state, self.wd["window_s"], now)))],
                ),
                (
                    "max_restarts",
                    "gauge",
                    "The bound (watchdog_max_restarts) per window.",
                    [({}, self.wd["max_restarts"])],
                ),
                (
                    "gave_up",
                    "gauge",
                    "1 when the watchdog gave up and waits for an operator.",
                    [({}, int(os.path.exists(self.gave_up)))],
                ),
                (
                    "reboot_required",
                    "gauge",
                    "1 when a node lacked the memory to start after a stop: it needs a reboot.",
                    [({}, int(os.path.exists(self.reboot)))],
                ),
                (
                    "paused",
                    "gauge",
                    "1 while an operator's pause holds every action.",
                    [({}, int(os.path.exists(self.paused)))],
                ),
                (
                    "held",
                    "gauge",
                    "1 while a run changing the cluster holds the watchdog.",
                    [({}, int(self.hold(now, settle=False) is not None))],
                ),
                ("unreachable_nodes", "gauge", "Nodes that do not answer now.", [({}, len(lost))]),
                (
                    "node_unreachable_seconds",
                    "gauge",
                    "How long each unreachable node (host) has not answered.",
                    [({"host": h}, now - e["since"]) for h, e in sorted(lost.items())],
                ),
                (
                    "stalled_seconds",
                    "gauge",
                    "How long the head has generated no token with "
                    "requests running (0: it progresses or nothing runs).",
                    [({}, now - prog["moved"] if prog.get("running", 0) > 0 else 0)],
                ),
                (
                    "last_detection_seconds",
                    "gauge",
                    "From the first bad observation to the restart decision, last restart.",
                    [({}, r["time"] - r["detected_at"]) for r in restarts[-1:]],
                ),
                (
                    "last_recovery_seconds",
                    "gauge",
                    "From the first bad observation to healthy again, last recovered restart.",
                    [({}, r["detection_to_healthy_s"]) for r in done[-1:]],
                ),
            ],
            "sparkfleet_watchdog_",
        )
        write_textfile(directory, "sparkfleet_watchdog.prom", text, self.log)

    def summary(self):
        state = read_json(self.state_file, {})
        now = self.clock.time()
        lost = state.get(UNREACHABLE, {})
        return {
            "unreachable": {
                host: dict(entry, for_s=round(now - entry["since"])) for host, entry in lost.items()
            },
            "unreachable_past_bound": sorted(h for h, e in lost.items() if e.get("past_bound")),
            "unreachable_s": self.unreachable_s,
            "paused": _first_line(self.paused) if os.path.exists(self.paused) else None,
            "held": self.hold(now, settle=False),
            "gave_up": _first_line(self.gave_up) if os.path.exists(self.gave_up) else None,
            "reboot_required": _first_line(self.reboot) if os.path.exists(self.reboot) else None,
            "drill": _first_line(self.drill) if os.path.exists(self.drill) else None,
            "max_restarts": self.wd["max_restarts"],
            "restarts_counted_in_window": len(
                [
                    r
                    for r in restarts_in_window(state, self.wd["window_s"], now)
                    if not r.get("transient")
                ]
            ),
            "now": now,
            "stall_s": self.wd.get("stall_s", 0),
            "progress": state.get("progress"),
            "last_stall": state.get("last_stall"),
            "last_memory": state.get("last_memory"),
            "last_observation": state.get("last_observation"),
            "last_decision": state.get("last_decision"),
            "restarts_in_window": len(restarts_in_window(state, self.wd["window_s"], now)),
            "window_s": self.wd["window_s"],
            "restarts": state.get("restarts", [])[-5:],
        }


def write_textfile(directory, name, text, log):
    """_textfile.write_textfile, a failure logged as a warning (the watchdog goes on)."""
    problem = _textfile.write_textfile(directory, name, text)
    if problem:
        log(problem, "WARNING")


def read_progress(path, now):
    """The progress file with its line as of now (and whether its writer still runs)."""
    p = read_json(path, {}) if path else {}
    alive = True
    if p.get("pid") and p.get("phase") not in ("done", "failed"):
        try:
            os.kill(int(p["pid"]), 0)
        except ProcessLookupError:
            alive = False
        except (OSError, ValueError):
            pass
    return dict(p, alive=alive, line=progress_line(p, now, alive))


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
    stamp = file_stamp(CONFIG)
    with open(CONFIG, encoding="utf-8") as fh:
        cfg = json.load(fh)
    if argv[0] == "watchdog":
        # The watchdog drives the collection's own cluster, never another engine.
        return watchdog_main(cfg, argv[1:], (CONFIG, stamp))
    try:
        cfg = with_driver(cfg, DRIVER)
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"sparkfleet-cluster: SPARKFLEET_CLUSTER_DRIVER: {exc}\n")
        return 2
    return cluster_main(cfg, argv[1:])


def cluster_main(cfg, argv):
    parser = argparse.ArgumentParser(
        prog="sparkfleet-cluster", description="Ordered control of the whole cluster."
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("status", help="every rank's launcher state (JSON)")
    sub.add_parser("check", help="every rank's launcher checks")
    sub.add_parser(
        "progress", help="the last restart, start or stop: its progress file and one line (JSON)"
    )
    restart = sub.add_parser(
        "restart", help="check all, stop all, start workers N-1..1, then the head"
    )
    restart.add_argument("--reason", default="operator")
    restart.add_argument(
        "--wait", type=int, default=0, help="seconds to wait for the head's /health (0: do not)"
    )
    sub.add_parser(
        "stop", help="deliberately stop every rank, the head first (the watchdog leaves it alone)"
    )
    start = sub.add_parser("start", help="start every rank in its order (after a stop)")
    start.add_argument(
        "--wait", type=int, default=0, help="seconds to wait for the head's /health (0: do not)"
    )
    args = parser.parse_args(argv)
    cluster = Cluster(
        cfg,
        Log(cfg["cluster_log"], "sparkfleet-cluster", echo=args.cmd not in ("status", "progress")),
    )
    if args.cmd == "status":
        print(json.dumps(cluster.states(), indent=2, sort_keys=True))
        return 0
    if args.cmd == "progress":
        print(json.dumps(read_progress(cluster.progress_path(), Clock.time()), sort_keys=True))
        return 0
    refused = cluster.only_stop_start()
    if args.cmd == "check" and refused:
        print(refused[1], file=sys.stderr)
        return EX_REFUSED
    if args.cmd == "check":
        refusals, results, booting = cluster.check()
        for line in refusals:
            print(line, file=sys.stderr)
        lost = cluster.unreached("check", results)
        if lost:
            print(lost[1], file=sys.stderr)
        if refusals:
            return EX_BOOTING if booting else EX_REFUSED
        return lost[0] if lost else 0
    if args.cmd == "stop":
        rc, msg = cluster.stop()
    elif args.cmd == "start":
        rc, msg = cluster.start(args.wait)
    else:
        rc, msg = cluster.restart(args.reason, args.wait)
    print(msg, file=sys.stderr if rc else sys.stdout)
    return rc


def watchdog_main(cfg, argv, config=None):
    parser = argparse.ArgumentParser(
        prog="sparkfleet-watchdog", description="Self-healing watchdog (cron)."
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("run", help="observe for up to a minute and act (cron)")
    sub.add_parser("status", help="paused, gave-up, last decision, restarts in the window (JSON)")
    pause = sub.add_parser("pause", help="hold every action until resume")
    pause.add_argument("reason", nargs="*")
    sub.add_parser("resume", help="remove the pause file")
    hold = sub.add_parser(
        "hold", help="hold every action for SECONDS (a run changing the cluster); ends by itself"
    )
    hold.add_argument("seconds", type=int)
    hold.add_argument("reason", nargs="*")
    sub.add_parser("release", help="end a hold")
    sub.add_parser("clear", help="clear a give-up and the restart history (after fixing the cause)")
    args = parser.parse_args(argv)
    wd = Watchdog(cfg, Log(cfg["watchdog"]["log_file"], "sparkfleet-watchdog"), config=config)
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
                "{} by {}: {}\n".format(iso(Clock.time()), who, " ".join(args.reason) or "operator")
            )
        wd.log("paused by {}: {}".format(who, " ".join(args.reason) or "operator"))
    elif args.cmd == "hold":
        if args.seconds <= 0:
            parser.error("hold: SECONDS must be positive")
        wd.take_hold(args.seconds, who, " ".join(args.reason) or "operator")
    elif args.cmd == "release":
        wd.release(who)
    elif args.cmd == "resume":
        if os.path.exists(wd.paused):
            os.unlink(wd.paused)
            wd.log(f"resumed by {who}")
    else:
        wd.clear(who)
    return 0


if __name__ == "__main__":
    sys.exit(main())
