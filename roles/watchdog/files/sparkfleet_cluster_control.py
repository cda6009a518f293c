# Copyright: sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster control, `sparkfleet-cluster status|check|progress|restart|stop|start`
(see sparkfleet_cluster.py): the ranks of one cluster driven through each node's launcher
(or another driver), the workers over the restricted SSH key; the one ordered restart.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import json
import os
import re
import subprocess
import sys

from sparkfleet_cluster_common import (
    EX_BOOTING,
    EX_BUSY,
    EX_FAILED,
    EX_MEMORY,
    EX_REFUSED,
    EX_UNHEALTHY,
    EX_UNREACHABLE,
    GONE,
    PROGRESS_FILE,
    RERUN_SITE,
    Clock,
    Log,
    driver_of,
    flocked,
    read_progress,
    setting,
    which,
    write_json,
    write_metrics,
)

# The collection's one HTTP client of the SGLang API (plugins/module_utils/_health.py, the
# same code as the sglang_health module), installed beside this file by the role.
try:
    import _health
except ImportError:  # the checkout's unit tests import this file from roles/watchdog/files
    from ansible_collections.sparkfleet.serving.plugins.module_utils import _health

# While the head's /health is awaited, every rank's state is read this often (seconds):
# a rank whose container exited ends the wait at once, quoting this many of its log lines.
RANK_WATCH_S = 5
EXITED_TAIL_LINES = 20
# What ssh(1) and a timed-out command return: the node did not answer.
NO_ANSWER = (255, 124)


def parse_docker_time(text):
    """Docker's StartedAt (RFC 3339, nanoseconds) as epoch seconds, or None."""
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$", text.strip())
    if not m or m.group(1).startswith("0001-"):
        return None
    frac = float("0" + m.group(2)) if m.group(2) else 0.0
    tz = "+00:00" if m.group(3) == "Z" else m.group(3)
    return datetime.datetime.fromisoformat(m.group(1) + tz).timestamp() + frac


def booted_ago(out):
    """The uptime_s=N a refusing launcher printed (seconds since its node booted), or None."""
    found = re.search(r"^uptime_s=(\d+(?:\.\d+)?)$", out or "", re.MULTILINE)
    return float(found.group(1)) if found else None


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
                # curve25519 first: OpenSSH's default post-quantum exchange (sntrup761)
                # costs the head ~0.1 CPU-s per connection, one per worker per observation
                # (measured 116 against 20 ms); the channel carries launcher verbs and their
                # answers, the key authenticates either way.
                "-o",
                "KexAlgorithms=^curve25519-sha256",
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
        window = int(setting(self.cfg, "boot_window_s"))
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
        directory = setting(self.cfg.get("watchdog") or {}, "textfile_dir")
        if not directory:
            return
        write_metrics(
            directory,
            "sparkfleet_cluster.prom",
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
            self.log,
        )

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
                    "; ".join(refusals), setting(self.cfg, "boot_window_s")
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
