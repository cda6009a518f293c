# Copyright: sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the cluster control and the watchdog share (see sparkfleet_cluster.py).

The clock, the log, the lock, JSON files written whole, the cluster description's
settings (with the fallbacks of an older description), the driver that runs a rank's
verbs, the node_exporter textfile writer and the progress file of a cluster operation.
Installed on the head beside sparkfleet_cluster.py, which puts its directory on sys.path.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import fcntl
import json
import math
import os
import shutil
import sys
import time

# The collection's node_exporter textfile writer (plugins/module_utils/_textfile.py, the
# launcher's too), installed beside this file by the role.
try:
    import _textfile
except ImportError:  # the checkout's unit tests import this file from roles/watchdog/files
    from ansible_collections.sparkfleet.serving.plugins.module_utils import _textfile

# A file of keys that replace the description's for one `sparkfleet-cluster` call: another
# engine on the same ranks (the canary's compose production). Only these keys.
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

# The cluster description (sparkfleet_cluster.CONFIG) is rendered by the role
# (roles/watchdog/tasks/control_apply.yml, "Write the cluster description") from
# roles/watchdog/defaults/main.yml: the programs read every setting as written there and
# repeat none of the role's defaults. The one exception is a description written before a
# key existed, which lacks it: the key is then read as below, for each key the value its
# program used before the key was written (sections: the description's top level or its
# "watchdog"). Only unreachable_s's is the role's default; the others turn the feature off,
# as it was before its key (the role's default now is named beside each).
FALLBACKS = {
    # boot_window_s: no refusal is a boot's transient (watchdog_boot_window_s: 600).
    "boot_window_s": 0,
    # watchdog.unreachable_s: the value of watchdog_unreachable_s in roles/watchdog/defaults
    # for a description written before watchdog.unreachable_s existed.
    "unreachable_s": 900,
    # watchdog.confirm_after_s: a bad observation confirmed one interval later, no sooner
    # (capped at interval_s where it is read; watchdog_confirm_after_s: 2).
    "confirm_after_s": math.inf,
    # watchdog.stall_s: no stall is looked for (0: off; watchdog_stall_s: 120).
    "stall_s": 0,
    # watchdog.textfile_dir: no textfile is written ("": off; watchdog_textfile_dir:
    # /var/lib/prometheus/node-exporter).
    "textfile_dir": "",
}


def setting(section, key):
    """The description's value of key in section (the top level or its "watchdog"), as the
    role wrote it; FALLBACKS[key] for a description written before the key existed."""
    value = section.get(key)
    return FALLBACKS[key] if value is None else value


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


def file_stamp(path):
    """What tells a rewritten file from the one read earlier (inode, mtime, size); None if gone."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def write_metrics(directory, name, families, prefix, log):
    """_textfile.write_textfile of these metric families (_textfile.metrics_text), a failure
    logged as a warning (the watchdog goes on)."""
    problem = _textfile.write_textfile(directory, name, _textfile.metrics_text(families, prefix))
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
