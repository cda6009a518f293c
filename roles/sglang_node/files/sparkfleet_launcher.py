# Copyright: sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The launcher of one SGLang rank on one node.

Installed by the role sparkfleet.serving.sglang_node beside _converge.py and _textfile.py,
with a one-line wrapper at the launcher path (sglang_node_bin) that runs it as

  python3 sparkfleet_launcher.py [--config RANK_JSON] [--textfile-dir DIR] VERB [ARGS]

  start             check the node, remove this launcher's other ranks and a leftover
                    container, run the rank, keep its log (follow-log, detached)
  check             refuse what would fail: the MTU, no RoCE GID for the data-plane
                    address, an unpatched file, a missing env file or image, a launch
                    argument the engine's own parser in the image refuses (a throwaway
                    container, verdict kept per image id and arguments); prints ok
                    (a refusal prints the node's uptime_s=N on stdout first)
  memcheck          (every rank stopped) refuse when MemAvailable does not cover the
                    profile's container.memory: a reboot is needed; prints ok
  stop [--restart]  stop and remove the rank; a deliberate stop (no --restart) is
                    remembered by the stopped mark until the next start
  status            running current|running stale|stopped|<docker state>|absent
  tail [LINES]      the last LINES (200) of the kept engine log
  show              the docker run argv, one argument a line
  config-hash       the configuration hash the container is labelled with
  follow-log        (start spawns it) docker logs, API key masked, into the engine log

The RoCE GID index is discovered, not pinned: every start reads the HCA's GID table again
(the collection's _gid.py, what the roce role reads) and passes the index of the data-plane
address as NCCL_IB_GID_INDEX; an index that moved since the last start (a reboot, an IPv6
address that appeared) is logged and used, and the configuration hash does not change. For
sglang_node_boot_wait_s after the node's boot (btime of /proc/stat), start waits for an MTU
or a GID that is not there yet (a port that comes up late) instead of refusing.

Every setting comes from one JSON file rendered by the role (--config, else
$SPARKFLEET_RANK_CONFIG, else /etc/sparkfleet/rank.json). A refusal is logged as
"REFUSED: <reason>" (stderr, last line, and <log_dir>/launch.log) and exits 1.
With --textfile-dir, each start, stop and refusal also rewrites sparkfleet_rank.prom there
(node_exporter's textfile collector): what this node's launcher last did, and the
configuration it last started.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

# The collection's one rule of the configuration hash (plugins/module_utils/_converge.py,
# the same code the role and the converge probe run), installed beside this file by the role.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import _converge
    import _engine_args
    import _gid
    import _profile_schema
    import _textfile
except ImportError:  # the checkout's unit tests run this file from roles/sglang_node/files
    from ansible_collections.sparkfleet.serving.plugins.module_utils import (
        _converge,
        _engine_args,
        _gid,
        _profile_schema,
        _textfile,
    )

DEFAULT_CONFIG = "/etc/sparkfleet/rank.json"
USAGE = "start|check|memcheck|stop [--restart]|status|tail [LINES]|show|config-hash"
EX_REFUSED = 1
# The fix a refusal names: the run that provisions the node (from the operator's controller).
RERUN_SITE = "ansible-playbook sparkfleet.serving.site -i <inventory>"
EX_USAGE = 2


# One inspect: the state and the configuration label ("-" on a container without it).
STATUS_FORMAT = '{{.State.Status}} {{or (index .Config.Labels "sparkfleet.config") "-"}}'
# SGLang prints its server_args with the API key: never kept in the engine log.
API_KEY = re.compile(rb"(api_key=)'[^']*'")


class Exit(Exception):
    """End the launcher with this exit code (what `set -e` or `exit N` did in bash)."""

    def __init__(self, code):
        super().__init__(code)
        self.code = code


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def docker(*args, stdout=None, stderr=None):
    """Start `docker ARGS` (a Popen). Every docker call of the launcher goes through here
    but the engine's parse of its arguments (_engine_args.parse, shared with a module)."""
    return subprocess.Popen(
        [shutil.which("docker") or "docker", *args], stdout=stdout, stderr=stderr
    )


def run_docker(*args, capture=False, quiet=False):
    """Run `docker ARGS` to its end: (exit code, its stdout when capture else "").

    Its stdout is discarded unless captured; quiet discards its stderr too (else the
    caller's stderr gets it). No docker on this node answers 127, as a shell would.
    """
    try:
        proc = docker(
            *args,
            stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
            stderr=subprocess.DEVNULL if quiet else None,
        )
    except OSError as exc:
        if not quiet:
            print(f"docker: {exc}", file=sys.stderr, flush=True)
        return 127, ""
    out = proc.communicate()[0]
    return proc.returncode, out.decode("utf-8", "replace") if capture else ""


def must(*args):
    """`docker ARGS >/dev/null` under `set -e`: a failure ends the launcher with its code."""
    rc = run_docker(*args)[0]
    if rc:
        raise Exit(rc)


def read_text(path):
    """A file's text (for sysfs), or None when it cannot be read."""
    try:
        with open(path, "rb") as fh:
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return None


class Rank:
    """One rank, as its JSON file describes it."""

    def __init__(self, config_path, cfg):
        self.config_path = config_path
        self.name = str(cfg["name"])
        self.launcher = str(cfg["launcher"])
        self.prog = os.path.basename(self.launcher)
        self.rank = int(cfg["rank"])
        self.image = str(cfg["image"])
        self.image_id = str(cfg["image_id"])
        self.env_file = str(cfg["env_file"])
        self.log_dir = str(cfg["log_dir"])
        self.engine_log = os.path.join(self.log_dir, f"{self.name}.log")
        # Written by a deliberate stop, removed by start: the watchdog never undoes it.
        self.stopped_mark = str(cfg["stopped_mark"])
        self.stop_timeout_s = int(cfg["stop_timeout_s"])
        self.log_max_size = str(cfg["log_max_size"])
        self.log_max_files = int(cfg["log_max_files"])
        self.patch_files = [str(p) for p in cfg["patch_files"]]
        node = cfg["node"]
        # Every data-plane function of the node (both halves of a 200G port when the
        # inventory lists them): its NIC, MTU and where its GID is read (None: gid_mode auto).
        self.links = [dict(link) for link in node["links"]]
        # A start this soon after the node's boot waits for the MTU and the GID.
        self.boot_wait_s = int(node.get("boot_wait_s") or 0)
        self.stat_file = str(node.get("stat_file") or "/proc/stat")
        self.sysfs_net = str(cfg.get("sysfs_net") or "/sys/class/net")
        self.docker_args = [str(a) for a in cfg["docker_args"]]
        self.host = str(cfg["host"])
        self.memory = dict(cfg["memory"])
        self.command = [str(a) for a in cfg["command"]]

    @classmethod
    def load(cls, path):
        path = os.path.abspath(path)
        with open(path, encoding="utf-8") as fh:
            cfg = json.load(fh)
        return cls(path, cfg)

    # --- logging ------------------------------------------------------------------

    def log(self, msg):
        line = f"{utc_now()} {self.prog}[{self.name}]: {msg}\n"
        try:
            os.makedirs(self.log_dir, exist_ok=True)
            with open(os.path.join(self.log_dir, "launch.log"), "a", encoding="utf-8") as fh:
                fh.write(line)
        except OSError as exc:
            print(f"{self.prog}: cannot append to launch.log: {exc}", file=sys.stderr)
        # Last on stderr: the cluster control reads a refusal's reason from the last line.
        sys.stderr.write(line)
        sys.stderr.flush()

    def refuse(self, reason):
        # Recorded first: the REFUSED line stays the last on stderr, where the cluster
        # control reads the reason, whatever the textfile's writing printed.
        self.export("refusal")
        self.log(f"REFUSED: {reason}")
        raise Exit(EX_REFUSED)

    # --- what node_exporter reads ---------------------------------------------------

    textfile_dir = ""

    def record_path(self):
        return os.path.join(self.log_dir, "launcher-metrics.json")

    def record(self):
        """What this launcher last did: each event's time and what the last start ran."""
        try:
            with open(self.record_path(), encoding="utf-8") as fh:
                record = json.load(fh)
        except (OSError, ValueError):
            return {}
        return record if isinstance(record, dict) else {}

    def export(self, event, **info):
        """Record a start, stop or refusal, and rewrite sparkfleet_rank.prom from the record.

        The record (<log_dir>/launcher-metrics.json) keeps the last time of each event and what
        the last start ran (the GID index it found, for the next start's comparison); a
        deliberate stop is the stopped mark itself. The series carry no node or rank label
        (the scrape target has them).
        """
        record_path = self.record_path()
        record = self.record()
        record[event] = datetime.datetime.now(datetime.timezone.utc).timestamp()
        record.update(info)
        try:
            os.makedirs(self.log_dir, exist_ok=True)
            with open(record_path + ".tmp", "w", encoding="utf-8") as fh:
                json.dump(record, fh)
            os.replace(record_path + ".tmp", record_path)
        except OSError as exc:
            print(f"{self.prog}: cannot keep {record_path}: {exc}", file=sys.stderr)
        if not self.textfile_dir:
            return
        families = [
            (
                f"last_{name}_timestamp_seconds",
                "gauge",
                f"When this node's launcher last {what}.",
                [({}, record[name])] if name in record else [],
            )
            for name, what in (
                ("start", "started its rank"),
                ("stop", "stopped its rank"),
                ("refusal", "refused to start its rank (launch.log says why)"),
            )
        ]
        families.append(
            (
                "stopped",
                "gauge",
                "1 after a deliberate stop (the watchdog leaves the rank alone until a start).",
                [({}, int(os.path.exists(self.stopped_mark)))],
            )
        )
        if record.get("config_hash"):
            families.append(
                (
                    "info",
                    "gauge",
                    "The container, image and configuration hash this node last started.",
                    [
                        (
                            {
                                "container": record.get("container", self.name),
                                "image": record.get("image", self.image),
                                "config_hash": record["config_hash"],
                            },
                            1,
                        )
                    ],
                )
            )
        if record.get("gid_index") is not None:
            families.append(
                (
                    "gid_index",
                    "gauge",
                    "The RoCE GID index the last start found for the data-plane address.",
                    [({}, record["gid_index"])],
                )
            )
        problem = _textfile.write_textfile(
            self.textfile_dir,
            "sparkfleet_rank.prom",
            _textfile.metrics_text(families, "sparkfleet_rank_"),
        )
        if problem:
            print(f"{self.prog}: {problem}", file=sys.stderr)

    # --- what this rank runs --------------------------------------------------------

    def config_hash(self):
        """The hash of this JSON file, its secrets file and the patched files (in order).

        The container carries it as a label, so a stale container is recognised; the
        role computes the same from the JSON text it renders. OSError when one of the
        files cannot be read.
        """
        paths = [self.config_path, self.env_file, *self.patch_files]
        return _converge.launch_config_hash([_converge.file_sha256(p) for p in paths])

    def config_hash_or_exit(self):
        try:
            return self.config_hash()
        except OSError as exc:
            print(
                f"{self.prog}: cannot compute the configuration hash: {exc}",
                file=sys.stderr,
                flush=True,
            )
            raise Exit(1) from None

    def run_argv(self, config_hash, gid_index=None):
        """The container this rank runs: start executes it, show prints it.

        ``gid_index``: the GID index discovered at this start (NCCL_IB_GID_INDEX), outside
        the configuration hash.
        """
        discovered = []
        if gid_index is not None:
            discovered = [
                "--label",
                f"sparkfleet.gid-index={gid_index}",
                "-e",
                f"NCCL_IB_GID_INDEX={gid_index}",
            ]
        return [
            "docker",
            "run",
            "-d",
            "--name",
            self.name,
            "--label",
            f"sparkfleet.config={config_hash}",
            "--label",
            f"sparkfleet.rank={self.rank}",
            "--label",
            f"sparkfleet.image-id={self.image_id}",
            "--label",
            f"sparkfleet.launcher={self.launcher}",
            "--log-opt",
            f"max-size={self.log_max_size}",
            "--log-opt",
            f"max-file={self.log_max_files}",
            *self.docker_args,
            *discovered,
            # The image id the patches were taken from, never the tag: a re-pulled or
            # re-tagged image cannot run under patches cut from another one.
            self.image_id,
            *self.command,
        ]

    # --- verbs ----------------------------------------------------------------------

    def uptime(self):
        """Seconds since the node booted (btime of the stat file), None when unreadable."""
        for line in (read_text(self.stat_file) or "").splitlines():
            name, _sep, value = line.partition(" ")
            if name == "btime" and value.strip().isdigit():
                return max(0.0, time.time() - int(value))
        return None

    def discover_gid(self, g):
        """(row, None) for the RoCE GID of one function's address now, or (None, problem)."""
        try:
            rows = [row for row in _gid.read_table(g["root"]) if row["hca"] == g["hca"]]
            return (
                _gid.select(rows, g["address"], int(g["roce_version"]), hcas=[g["hca"]]),
                None,
            )
        except _gid.GidError as exc:
            return None, f"{exc}; the port is not up yet, or re-run {RERUN_SITE} (roce role)"

    def gid_rows(self):
        """(rows, problems): the GID row of each function's address, or why there is none.

        NCCL takes one NCCL_IB_GID_INDEX for every HCA: functions whose rows sit at
        different indices are a problem (gid_mode auto lets NCCL pick per HCA).
        """
        rows, problems = [], []
        for link in self.links:
            if not link.get("gid"):
                continue
            row, problem = self.discover_gid(link["gid"])
            if problem:
                problems.append(problem)
            else:
                rows.append(row)
        if not problems and len({row["index"] for row in rows}) > 1:
            problems.append(
                "the RoCE GIDs of the data-plane functions sit at different indices ("
                + ", ".join(f"{row['index']} on {row['hca']}" for row in rows)
                + "), and NCCL takes one NCCL_IB_GID_INDEX for every HCA; fix: set "
                "roce_gid_mode: auto (NCCL then finds each HCA's GID in NCCL_IB_ADDR_RANGE)"
            )
        return rows, problems

    def gid_index_now(self):
        """The GID index a start would pass now (None: gid_mode auto, or none found)."""
        rows, problems = self.gid_rows()
        for problem in problems:
            print(f"{self.prog}: {problem}", file=sys.stderr)
        return rows[0]["index"] if rows and not problems else None

    def link_problems(self):
        """What the data plane lacks now (MTU, an address's GID) and the GID rows found."""
        problems = []
        for link in self.links:
            raw = read_text(os.path.join(self.sysfs_net, link["iface"], "mtu"))
            mtu = raw.strip() if raw is not None else "0"
            try:
                mtu_value = int(mtu)
            except ValueError:
                mtu_value = 0
            if mtu_value < int(link["mtu"]):
                problems.append(
                    f"{link['iface']} MTU is {mtu}, below {int(link['mtu'])}: RDMA over this path "
                    f"would fail; re-run {RERUN_SITE} (roce role) or fix the NIC"
                )
        rows, gid_problems = self.gid_rows()
        return problems + gid_problems, rows

    def check_node(self, wait=False):
        """Refuse what would fail; returns the GID rows of the data-plane addresses.

        With ``wait`` (start), a data plane that is not ready this soon after the node's
        boot is waited for, up to boot_wait_s after the boot: a port that comes up late.
        """
        problems, rows = self.link_problems()
        uptime = self.uptime()
        if problems and wait and uptime is not None and uptime < self.boot_wait_s:
            self.log(
                f"booted {uptime:.0f} s ago and not ready ({problems[0]}); waiting up to "
                f"{self.boot_wait_s - uptime:.0f} s (sglang_node_boot_wait_s)"
            )
            while problems and uptime is not None and uptime < self.boot_wait_s:
                time.sleep(2)
                problems, rows = self.link_problems()
                uptime = self.uptime()
        if problems:
            # The cluster control tells a node still booting (a transient) from a refusal.
            if uptime is not None:
                print(f"uptime_s={uptime:.0f}", flush=True)
            self.refuse("; ".join(problems))
        for path in self.patch_files:
            try:
                with open(path, "rb") as fh:
                    content = fh.read()
            except OSError:
                content = b""
            if b"HARDEN-PATCH" not in content:
                self.refuse(
                    f"patch file {path} is missing or not patched; "
                    f"re-run {RERUN_SITE} (sglang_patches role)"
                )
        if not os.access(self.env_file, os.R_OK):
            self.refuse(f"{self.env_file} is missing; re-run {RERUN_SITE} (sglang_node role)")
        if run_docker("image", "inspect", self.image_id, quiet=True)[0] != 0:
            self.refuse(
                f"image {self.image_id} (the {self.image} the patches were cut from) is no "
                f"longer on this node; load that image again, or re-run {RERUN_SITE} to patch the "
                f"image {self.image} now names"
            )
        rc, out = run_docker(
            "image", "inspect", "--format", "{{.Id}}", self.image, capture=True, quiet=True
        )
        tagged = out.strip() if rc == 0 else "absent"
        if tagged != self.image_id:
            self.log(
                f"{self.image} now points at {tagged}, not {self.image_id}: running "
                f"{self.image_id} (what the patches were cut from); re-run {RERUN_SITE} to move "
                "to the new image"
            )
        return rows

    def check_engine_args(self):
        """Refuse launch arguments the engine in the image refuses (its own parser, in a
        throwaway container: no GPU, no network, nothing started; _engine_args.check, the
        rule the canary's check before its stop runs too)."""
        refused, why = _engine_args.check(
            self.image,
            self.image_id,
            self.command,
            os.path.dirname(self.stopped_mark),
            f"{self.name}-argcheck-{os.getpid()}",
            _profile_schema.server_flags(),
        )
        if why:
            self.log(why)
        if refused:
            self.refuse(refused)

    def memcheck(self):
        """After every rank stopped: does MemAvailable cover what the rank may use?

        The collection's one memory rule (_converge.memory_problem, also the preflight
        host check's). A crashed engine's share of the GB10's unified memory can stay
        taken; starting into it loops until the node stops answering.
        """
        meminfo = str(self.memory["meminfo"])
        free = _converge.mem_available(meminfo)
        short = _converge.memory_problem(
            self.host,
            int(self.memory["need_bytes"]),
            free,
            self.memory.get("setting"),
            f"MemAvailable of {meminfo} with the rank stopped"
            + ("" if free is not None else ", which cannot be read"),
            f"reboot {self.host} (a crashed engine's memory is not returned), then "
            "sparkfleet-watchdog clear on the head, or lower container.memory",
        )
        if short:
            self.refuse(short)

    def remove_other_ranks(self):
        """Stop and remove the ranks this launcher started under another container name.

        (The profile's container_name changed: two engines never hold the node's GPU
        memory or ports at once.) Another launcher's ranks (the canary's candidates)
        are not this one's to remove.
        """
        out = run_docker(
            "ps",
            "-a",
            "--filter",
            "label=sparkfleet.rank",
            "--filter",
            f"label=sparkfleet.launcher={self.launcher}",
            "--format",
            "{{.Names}}",
            capture=True,
        )[1]
        for other in out.split():
            if other == self.name:
                continue
            run_docker("stop", "--time", str(self.stop_timeout_s), other, quiet=True)
            must("rm", "-f", other)
            self.log(
                f"removed {other}, a rank of an earlier profile (this rank is now {self.name})"
            )

    def start(self):
        rows = self.check_node(wait=True)
        self.remove_other_ranks()
        if run_docker("container", "inspect", self.name, quiet=True)[0] == 0:
            must("rm", "-f", self.name)
            self.log(f"removed leftover container {self.name}")
        os.makedirs(self.log_dir, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.stopped_mark)
        config_hash = self.config_hash_or_exit()
        gid_index = None
        if rows:
            gid_index = rows[0]["index"]
            before = self.record().get("gid_index")
            if before is not None and before != gid_index:
                self.log(
                    f"the RoCE v{rows[0]['version'][1:]} GID of "
                    + ", ".join(row["ipv4"] for row in rows)
                    + f" moved from index {before} to {gid_index} ("
                    + "; ".join(_gid.describe(row) for row in rows)
                    + f"): using {gid_index} (a reboot or a hardware swap; the configuration "
                    "is unchanged)"
                )
        must(*self.run_argv(config_hash, gid_index)[1:])
        # setsid nohup: the follower outlives this process and the caller's session.
        subprocess.Popen(
            [
                sys.executable,
                os.path.abspath(__file__),
                "--config",
                self.config_path,
                "follow-log",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.log(
            f"started {self.name} (rank {self.rank}, config {config_hash}), log {self.engine_log}"
        )
        self.export(
            "start",
            container=self.name,
            image=self.image,
            config_hash=config_hash,
            gid_index=gid_index,
        )

    def follow_log(self):
        """Keep the engine's output where it survives the container, without the API key."""
        os.umask(0o077)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)  # nohup (docker logs inherits it)
        with open(self.engine_log, "ab") as out:
            try:
                proc = docker(
                    "logs",
                    "--follow",
                    "--timestamps",
                    self.name,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                )
            except OSError as exc:
                print(f"docker: {exc}", file=sys.stderr)
                return 127
            with proc.stdout:
                for line in proc.stdout:
                    out.write(API_KEY.sub(rb"\1'***'", line))
                    out.flush()
            return proc.wait()

    def stop(self, how):
        """A deliberate stop, remembered until the next start (the watchdog leaves such a
        rank alone); --restart: the first half of an ordered restart, not remembered."""
        why = "deliberate"
        if how == "--restart":
            why = "restart"
        else:
            who = os.environ.get("SUDO_USER") or os.environ.get("USER") or "root"
            os.makedirs(os.path.dirname(self.stopped_mark) or ".", exist_ok=True)
            with open(self.stopped_mark, "w", encoding="utf-8") as fh:
                fh.write(f"{utc_now()} by {who}\n")
        if run_docker("container", "inspect", self.name, quiet=True)[0] == 0:
            run_docker("stop", "--time", str(self.stop_timeout_s), self.name, quiet=True)
            must("rm", "-f", self.name)
            self.log(f"stopped {self.name} ({why})")
        self.remove_other_ranks()
        self.export("stop")

    def tail(self, lines):
        """The last lines of the kept engine log (API key already masked): the watchdog's
        evidence before it restarts a cluster."""
        if not re.fullmatch(r"[0-9]+", lines):
            print("tail: LINES must be a number", file=sys.stderr)
            raise Exit(EX_USAGE)
        try:
            data = last_lines(self.engine_log, int(lines))
        except OSError:
            return
        sys.stdout.buffer.write(data)
        sys.stdout.flush()

    def status(self):
        # For a container that does not exist docker prints an empty line and fails: absent.
        rc, out = run_docker(
            "container", "inspect", "--format", STATUS_FORMAT, self.name, capture=True, quiet=True
        )
        first = out.splitlines()[0] if rc == 0 and out.strip() else ""
        state, label = [*first.split(None, 1), "", ""][:2]
        state = state or "absent"
        label = label.strip()
        if state != "running":
            if state != "paused" and os.path.exists(self.stopped_mark):
                return "stopped"
            return state
        try:
            current = self.config_hash()
        except OSError:  # a file of the configuration is gone: not what runs
            current = None
        return "running current" if label == current else "running stale"


def last_lines(path, count):
    """The last `count` lines of a file, as `tail -n` prints them (read from its end)."""
    if count == 0:
        return b""
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        pos = fh.tell()
        data = b""
        # More newlines than lines wanted: the first (partial) piece is not among them.
        while pos > 0 and data.count(b"\n") <= count:
            step = min(1 << 16, pos)
            pos -= step
            fh.seek(pos)
            data = fh.read(step) + data
    pieces = data.split(b"\n")
    last = pieces.pop()  # b"" after a final newline, else an unterminated last line
    lines = [p + b"\n" for p in pieces]
    if last:
        lines.append(last)
    return b"".join(lines[-count:])


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    config = os.environ.get("SPARKFLEET_RANK_CONFIG") or DEFAULT_CONFIG
    textfile_dir = ""
    while argv and argv[0].split("=", 1)[0] in ("--config", "--textfile-dir"):
        name, equals, value = argv[0].partition("=")
        if not equals:
            if len(argv) < 2:
                break
            value, argv = argv[1], argv[1:]
        argv = argv[1:]
        if name == "--config":
            config = value
        else:
            textfile_dir = value
    verb, args = (argv[0], argv[1:]) if argv else ("", [])
    try:
        rank, problem = Rank.load(config), None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        rank, problem = None, exc
    if rank is not None:
        rank.textfile_dir = textfile_dir
    prog = rank.prog if rank else os.path.basename(sys.argv[0])
    verbs = (
        "start",
        "check",
        "memcheck",
        "follow-log",
        "stop",
        "status",
        "tail",
        "show",
        "config-hash",
    )
    if verb not in verbs:
        print(f"usage: {prog} {USAGE}", file=sys.stderr)
        return EX_USAGE
    if rank is None:
        what = f"no {problem}" if isinstance(problem, KeyError) else str(problem)
        print(
            f"{prog}: REFUSED: cannot read the rank configuration {config} ({what}); "
            f"re-run {RERUN_SITE} (sglang_node role)",
            file=sys.stderr,
        )
        return EX_REFUSED
    arg = args[0] if args else ""
    try:
        if verb == "start":
            rank.start()
        elif verb == "check":
            rank.check_node()
            rank.check_engine_args()
            print("ok")
        elif verb == "memcheck":
            rank.memcheck()
            print("ok")
        elif verb == "follow-log":
            return rank.follow_log()
        elif verb == "stop":
            rank.stop(arg)
        elif verb == "status":
            print(rank.status())
        elif verb == "tail":
            rank.tail(arg or "200")
        elif verb == "show":
            print("\n".join(rank.run_argv(rank.config_hash_or_exit(), rank.gid_index_now())))
        else:
            print(rank.config_hash_or_exit())
    except Exit as done:
        return done.code
    return 0


if __name__ == "__main__":
    sys.exit(main())
