#!/usr/bin/env python3
"""make bench: the collection's own speed on the twin, in one run so ratios hold.

Sections (each a function below, registered in SECTIONS; a section whose feature
is not in this checkout is skipped with a note, so the run still completes):

- provisioning: for 2, 4 and 8 nodes (inventory/sim-2node, sim, sim-8node): cold
  site.yml on a fresh twin to healthy, then the no-change re-run; median, min and
  max over --runs; the 8/4 ratio of the no-change run; tasks and connection
  round-trips per host, and the slowest tasks (profile_tasks), from one extra
  no-change run at -vvv.
- weights: mirror bytes served / model bytes (needs roles/model_weights).
- recovery: crash->decision, crash->healthy and the orchestration overhead beyond
  the engine's own boot, for a head kill, a worker kill and a wedge, read from the
  watchdog's state file on the 4-node twin (roles/watchdog).

Every twin size is benchmarked under the global twin lock, held for that size only
(other engineers' molecule runs interleave between sizes); the twin's images are built,
when their inputs changed, by create.yml inside that hold. Results:
bench/results/<stamp>.json and .md, bench/results/latest.md, and the block of docs/benchmarks.md
between the bench markers. Benchmarks never fail on a number: the exit status is
non-zero only when a playbook itself failed.

Adding a section: write `def section_NAME(ctx) -> dict` returning
{"title", "table" (Markdown lines), "data" (JSON-able)} or ctx.skip(reason); add
Section("NAME", section_NAME, needs=<path that must exist>) to SECTIONS.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import fcntl
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV_BIN = os.path.join(ROOT, ".venv", "bin")
SIZES = {2: "inventory/sim-2node", 4: "inventory/sim", 8: "inventory/sim-8node"}
# The block of this page between these markers is the latest table.
DOCS_PAGE = os.path.join("docs", "benchmarks.md")
DOCS_START = "<!-- bench:start (written by make bench) -->"
DOCS_END = "<!-- bench:end -->"
RECAP = re.compile(
    r"^(?P<host>\S+)\s+:\s+ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+unreachable=(?P<unreachable>\d+)"
    r"\s+failed=(?P<failed>\d+)\s+skipped=(?P<skipped>\d+)"
)
# One line per connection call at -vvv: the docker connections print
# "<spark-1> EXEC [...]", "<spark-1> PUT ...", ssh prints "<host> SSH: EXEC ssh ...".
ROUND_TRIP = re.compile(r"^<(?P<host>[^>]+)> (?:SSH: )?(?P<op>EXEC|PUT|FETCH)\b")
TASK_LINE = re.compile(r"^(?:TASK|RUNNING HANDLER) \[(?P<task>.+)\] \*+\s*$")
# profile_tasks prints, before each task, the previous task's duration in parentheses.
STAMP_LINE = re.compile(
    r"^\w+ \d\d \w+ \d{4}\s+[\d:]+ \S+ \((?P<h>\d+):(?P<m>\d\d):(?P<s>[\d.]+)\)"
)
PROFILE_LINE = re.compile(r"^(?P<task>.+?) -{2,} (?P<secs>\d+\.\d+)s$")


def resumed_note(sizes):
    """The table's note on sizes an earlier, interrupted run measured (`--resume`)."""
    resumed = {size: s["from_run"] for size, s in sizes.items() if s.get("from_run")}
    if not resumed:
        return []
    return [
        "",
        "Measured by an earlier, interrupted run of the same code (`--resume`): "
        + ", ".join(f"{size} nodes in run {stamp}" for size, stamp in resumed.items())
        + ".",
    ]


def log(msg):
    print(f"bench: {msg}", flush=True)


@dataclass
class Section:
    name: str
    func: object
    needs: str | None = None  # a path in the checkout that the feature brings


@dataclass
class Context:
    runs: int
    sizes: list
    lock_path: str
    out_dir: str
    logs_dir: str
    failures: list = field(default_factory=list)
    last_cpu: float = 0.0
    partial_path: str = ""
    weights: dict = field(default_factory=dict)  # size -> figures (section weights)
    inventories: dict = field(default_factory=dict)  # inventory -> inventory_info()
    wanted: list = field(default_factory=list)  # the sections of this run
    weights_sizes: list = field(default_factory=list)  # sizes of the weights section
    resumed: dict = field(default_factory=dict)  # provisioning sizes kept from --resume

    def checkpoint(self, section, data):
        """Write what is measured so far next to the final results."""
        if not self.partial_path:
            return
        try:
            with open(self.partial_path, encoding="utf-8") as handle:
                done = json.load(handle)
        except (OSError, ValueError):
            done = {}
        done[section] = data
        write(self.partial_path, json.dumps(done, indent=2) + "\n")

    @staticmethod
    def skip(reason):
        return {"skipped": reason}

    @contextlib.contextmanager
    def twin_lock(self, what):
        """flock(2) on the same file as `flock /tmp/sparkfleet-twin.lock ...`."""
        with open(self.lock_path, "a") as handle:
            log(f"waiting for the twin lock ({what})")
            fcntl.flock(handle, fcntl.LOCK_EX)
            log(f"holding the twin lock ({what})")
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def playbook(self, inventory, playbook, name, *extra, env=None):
        """Run ansible-playbook; returns (rc, wall seconds, output)."""
        cmd = [os.path.join(VENV_BIN, "ansible-playbook"), "-i", inventory, playbook, *extra]
        if "inventory/sim" in inventory:
            cmd += ["--vault-password-file", "twin/vault-password"]
        full_env = ansible_env(env)
        start = time.monotonic()
        cpu0 = os.times()
        proc = subprocess.run(cmd, cwd=ROOT, env=full_env, capture_output=True, text=True)
        wall = time.monotonic() - start
        cpu1 = os.times()
        # Controller CPU (ansible-playbook and the processes it waited for: workers,
        # docker CLI or ssh): steadier than wall time on a shared machine.
        self.last_cpu = (cpu1.children_user - cpu0.children_user) + (
            cpu1.children_system - cpu0.children_system
        )
        out = proc.stdout + proc.stderr
        with open(os.path.join(self.logs_dir, f"{name}.log"), "w", encoding="utf-8") as handle:
            handle.write(out)
        if proc.returncode != 0:
            self.failures.append(f"{name}: {playbook} -i {inventory} exited {proc.returncode}")
            log(f"{name}: FAILED (rc {proc.returncode}), see {self.logs_dir}/{name}.log")
        else:
            log(f"{name}: {wall:.1f} s")
        return proc.returncode, wall, out


def ping_round(inventory):
    """Wall seconds of one `ansible -m ping` round over every node of ``inventory``.

    The yardstick of the no-change target (issue 20): a run that changes nothing should
    cost about one connection round trip per node, a small multiple of this."""
    cmd = [os.path.join(VENV_BIN, "ansible"), "-i", inventory, "spark_nodes", "-m", "ping"]
    if "inventory/sim" in inventory:
        cmd += ["--vault-password-file", "twin/vault-password"]
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, env=ansible_env(), capture_output=True, text=True)
    return round(time.monotonic() - start, 2) if proc.returncode == 0 else None


def ansible_env(extra=None):
    full_env = dict(os.environ)
    full_env.update(
        PATH=VENV_BIN + os.pathsep + os.environ.get("PATH", ""),
        ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
        ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".collections"),
        ANSIBLE_NOCOLOR="1",
    )
    full_env.update(extra or {})
    return full_env


def default_lock():
    """One twin per docker daemon: a private daemon (DOCKER_HOST) gets its own lock."""
    host = os.environ.get("DOCKER_HOST", "")
    if not host or host == "unix:///var/run/docker.sock":
        return "/tmp/sparkfleet-twin.lock"
    return "/tmp/sparkfleet-twin-" + re.sub(r"[^A-Za-z0-9]+", "-", host).strip("-") + ".lock"


def recap(output):
    return {
        m["host"]: {k: int(v) for k, v in m.groupdict().items() if k != "host"}
        for m in map(RECAP.match, output.splitlines())
        if m
    }


def spread(values):
    if not values:
        return None
    return {
        "median": round(statistics.median(values), 1),
        "min": round(min(values), 1),
        "max": round(max(values), 1),
        "runs": [round(v, 1) for v in values],
    }


def load_average():
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def load_averages():
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


# ---- sections ---------------------------------------------------------------


def section_provisioning(ctx):
    sizes = dict(ctx.resumed)
    for size in ctx.sizes:
        if str(size) in sizes:
            log(f"provisioning {size} nodes: kept from {sizes[str(size)].get('from_run')}")
            continue
        inv = SIZES[size]
        cold, warm, warm_cpu, changed, load, pings = [], [], [], [], [], []
        with ctx.twin_lock(f"{size} nodes"):
            for run in range(1, ctx.runs + 1):
                ctx.playbook(inv, "twin/playbooks/destroy.yml", f"n{size}-r{run}-destroy")
                rc, _, _ = ctx.playbook(inv, "twin/playbooks/create.yml", f"n{size}-r{run}-create")
                if rc != 0:
                    break
                load.append(load_average())
                rc, secs, _ = ctx.playbook(inv, "site.yml", f"n{size}-r{run}-cold")
                if rc != 0:
                    break
                cold.append(secs)
                if "weights" in ctx.wanted:
                    measure_weights(ctx, size, inv, "cold")
                rc, secs, out = ctx.playbook(inv, "site.yml", f"n{size}-r{run}-nochange")
                if rc != 0:
                    break
                if "weights" in ctx.wanted:
                    measure_weights(ctx, size, inv, "nochange")
                warm.append(secs)
                warm_cpu.append(ctx.last_cpu)
                # The same nodes' ping round, measured in the same run (the target's unit).
                pings += [p for p in (ping_round(inv) for _ in range(3)) if p is not None]
                changed.append(sum(h["changed"] for h in recap(out).values()))
            # One more no-change run, verbose and profiled: tasks, round-trips, slowest tasks.
            counted = {}
            if warm:
                rc, secs, out = ctx.playbook(
                    inv,
                    "site.yml",
                    f"n{size}-counted",
                    "-vvv",
                    env={
                        "ANSIBLE_CALLBACKS_ENABLED": "ansible.posix.profile_tasks",
                        "PROFILE_TASKS_TASK_OUTPUT_LIMIT": "12",
                    },
                )
                if rc == 0:
                    counted = count_calls(out)
                if "weights" in ctx.wanted:
                    bulk_mb = int(os.environ.get("BENCH_FANOUT_MB", "64"))
                    measure_weights(ctx, size, inv, "fanout", bulk_mb=bulk_mb)
            ctx.playbook(inv, "twin/playbooks/destroy.yml", f"n{size}-destroy")
        sizes[str(size)] = {
            "inventory": inv,
            "cold_s": spread(cold),
            "nochange_s": spread(warm),
            "nochange_controller_cpu_s": spread(warm_cpu),
            "nochange_changed": changed,
            "ping_round_s": spread(pings),
            "nochange_over_ping": (
                round(spread(warm)["median"] / spread(pings)["median"], 1)
                if warm and pings
                else None
            ),
            "load_avg_1m": load,
            **counted,
        }
        # A size done is a result kept, even if a later size never gets the lock.
        ctx.checkpoint("provisioning", {"partial": True, "sizes": sizes})
    ratio = None
    if (sizes.get("8") or {}).get("nochange_s") and (sizes.get("4") or {}).get("nochange_s"):
        ratio = round(sizes["8"]["nochange_s"]["median"] / sizes["4"]["nochange_s"]["median"], 2)
    return {
        "title": "Provisioning (site.yml on the twin)",
        "data": {"sizes": sizes, "nochange_ratio_8_4": ratio},
        "table": provisioning_table(sizes, ratio, ctx.runs),
    }


def count_calls(output):
    per_host = {}
    for line in output.splitlines():
        m = ROUND_TRIP.match(line)
        if m:
            per_host[m["host"]] = per_host.get(m["host"], 0) + 1
    tasks = recap(output)
    slowest = []
    in_profile = False
    for line in output.splitlines():
        if line.startswith("=" * 20):
            in_profile = True
            continue
        if in_profile:
            m = PROFILE_LINE.match(line.strip())
            if m:
                slowest.append({"task": m["task"], "s": float(m["secs"])})
    hosts = sorted(tasks)
    return {
        "tasks_per_host": {h: tasks[h]["ok"] + tasks[h]["changed"] for h in hosts},
        "skipped_per_host": {h: tasks[h]["skipped"] for h in hosts},
        "round_trips_per_host": {h: per_host.get(h, 0) for h in hosts},
        "slowest_tasks": slowest[:12],
        "time_by_role": time_by_role(output),
    }


def time_by_role(output):
    """Where a profiled (-vvv, profile_tasks) run spends its time, per role: wall seconds
    (the tasks' durations as profile_tasks measured them), tasks and connection
    round-trips (all hosts). Tasks outside a role count under "(play tasks)"."""
    roles, current, pending = {}, None, None

    def entry(label):
        role = label.split(" : ", 1)[0] if " : " in label else "(play tasks)"
        return roles.setdefault(role, {"s": 0.0, "tasks": 0, "round_trips": 0})

    for line in output.splitlines():
        m = TASK_LINE.match(line)
        if m:
            # The stamp under a task line is the previous task's duration.
            pending, current = current, m["task"]
            entry(current)["tasks"] += 1
        elif line.startswith("PLAY RECAP"):
            pending, current = current, None  # the stamp under the recap: the last task's
        elif (m := STAMP_LINE.match(line)) is not None:
            if pending is not None:
                entry(pending)["s"] += int(m["h"]) * 3600 + int(m["m"]) * 60 + float(m["s"])
            pending = None
        elif current is not None and ROUND_TRIP.match(line):
            entry(current)["round_trips"] += 1
    for figures in roles.values():
        figures["s"] = round(figures["s"], 2)
    return dict(sorted(roles.items(), key=lambda kv: -kv[1]["s"]))


def fmt_spread(s):
    return "n/a" if not s else f"{s['median']:.1f} ({s['min']:.1f}-{s['max']:.1f})"


def provisioning_table(sizes, ratio, runs):
    lines = [
        "| nodes | cold site.yml to healthy, s | no-change re-run, s | ping round, s | "
        "no-change / ping | no-change controller CPU, s | changed on re-run | tasks / host | "
        "round-trips / host | load avg (1 min) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for size, s in sizes.items():
        tph = s.get("tasks_per_host") or {}
        rtt = s.get("round_trips_per_host") or {}
        lines.append(
            f"| {size} | {fmt_spread(s['cold_s'])} | {fmt_spread(s['nochange_s'])} | "
            f"{fmt_spread(s.get('ping_round_s'))} | {s.get('nochange_over_ping') or 'n/a'} | "
            f"{fmt_spread(s['nochange_controller_cpu_s'])} | "
            f"{', '.join(map(str, s['nochange_changed'])) or 'n/a'} | "
            f"{max(tph.values()) if tph else 'n/a'} | "
            f"{min(rtt.values()) if rtt else 'n/a'}-{max(rtt.values()) if rtt else 'n/a'} | "
            f"{', '.join(str(x) for x in s['load_avg_1m'] if x is not None) or 'n/a'} |"
        )
    lines += [
        "",
        f"Median (min-max) of {runs} run(s) per size. No-change ratio 8/4 nodes: "
        f"**{ratio if ratio is not None else 'n/a'}**. Tasks and round-trips (connection "
        "calls: EXEC, PUT, FETCH) per host from one more no-change run at -vvv; tasks counts "
        "ok + changed of the busiest host; round-trips min-max over hosts. Ping round: one "
        "`ansible -m ping` over the same nodes, 3 per run, taken right after each no-change "
        "run (issue 20's targets: no-change at most 5x a ping round, at most 6 round trips "
        "per host, 8/4 at most 1.3).",
    ]
    lines += resumed_note(sizes)
    for size, s in sizes.items():
        if s.get("time_by_role"):
            lines += ["", f"Where the {size}-node no-change run spends its time, per role:", ""]
            lines += [
                f"- {r['s']:.1f} s, {r['tasks']} tasks, {r['round_trips']} round-trips: {role}"
                for role, r in s["time_by_role"].items()
            ]
        if s.get("slowest_tasks"):
            lines += ["", f"Slowest tasks of the {size}-node no-change run (profile_tasks):", ""]
            lines += [f"- {t['s']:.2f} s {t['task']}" for t in s["slowest_tasks"][:8]]
    return lines


# ---- weights -------------------------------------------------------------------
#
# Two figures per twin size, both from a twin whose weights were staged by site.yml
# through the twin's mirror (olah behind twin/mirror/front.py, which counts the body
# bytes it serves per file):
# - mirror bytes served / model bytes: what the cold run pulled from the mirror, over
#   the bytes of the revisions staged on the head (their manifests); 1.0 means every
#   file crossed the mirror link once for the whole cluster. The no-change re-run's
#   bytes are read too (0 expected).
# - fan-out throughput: the head sends to every peer at once with the role's own rsync
#   command (fan-out key, pinned host keys, the peers' rrsync into the weights store),
#   against a plain copy of the same files to one peer over the same network (tar over
#   ssh with a one-off key: no rsync, no rrsync, no Ansible). Both on the staged model
#   files and on a larger file (BENCH_FANOUT_MB), because the twin's model is about
#   1 MB and its transfers are all handshake.

WEIGHTS_INVENTORY = "inventory/sim-8node"  # has a mirror; smaller twins are cut from it
BENCH_DIR = ".sparkfleet-bench"  # under the peers' weights store (rrsync's root)
HEAD_TMP = "/tmp/sparkfleet-bench"
PLAIN_COMMENT = "sparkfleet-bench-plain"
MANIFEST = ".sparkfleet-manifest.json"
# Runs on the head: start every command at once, wait for all, report the wall time.
PARALLEL = """
import json, subprocess, sys, time
jobs = json.loads(sys.argv[1])
t0 = time.monotonic()
procs = [subprocess.Popen(a, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for a in jobs]
rcs = []
for p in procs:
    _, err = p.communicate()
    rcs.append({"rc": p.returncode, "err": err.decode(errors="replace")[-400:]})
print(json.dumps({"wall_s": time.monotonic() - t0, "jobs": rcs}))
"""


def mb(count):
    return count / 1e6


def weights_ratio(stats, manifests):
    """Mirror bytes served over model bytes. stats: the front's /_sparksim/stats;
    manifests: the head's staged revision manifests (repo, commit, files[path, size])."""
    model = {f"{m['repo']}/{f['path']}": int(f["size"]) for m in manifests for f in m["files"]}
    files = stats.get("files") or {}
    served = sum(int(e.get("bytes", 0)) for e in files.values())
    model_bytes = sum(model.values())
    return {
        "model_bytes": model_bytes,
        "served_bytes": served,
        "ratio": round(served / model_bytes, 3) if model_bytes else None,
        "files": len(model),
        "max_gets_per_file": max((int(e.get("gets", 0)) for e in files.values()), default=0),
        "served_not_in_model": sorted(set(files) - set(model)),
    }


def throughput(size_bytes, transfers, wall_s):
    """MB/s (10^6 bytes) moved by `transfers` copies of size_bytes in wall_s."""
    if not wall_s or wall_s <= 0:
        return None
    return round(mb(size_bytes * transfers) / wall_s, 1)


def ssh_options(known_hosts):
    return (
        "-o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=yes "
        f"-o UserKnownHostsFile={known_hosts} -o GlobalKnownHostsFile=/dev/null "
        "-o ConnectTimeout=15"
    )


def role_rsync_argv(ssh_dir, src, user, peer, dest):
    """The rsync the model_weights role runs on the head for one peer and revision
    (roles/model_weights/tasks/fanout.yml; a unit test holds the two together)."""
    return [
        "rsync",
        "--archive",
        "--partial",
        "--exclude=/.sparkfleet-verified.json",
        f"--rsh=ssh -i {ssh_dir}/weights_ed25519 " + ssh_options(f"{ssh_dir}/known_hosts.weights"),
        f"{src}/",
        f"{user}@{peer}:{dest}/",
    ]


def one_after_another(commands):
    """One job per peer: the revisions for one peer go one after another (as the plain
    copy's do, so the two figures compare the same pattern); the peers all at once."""
    if len(commands) == 1:
        return commands[0]
    return ["sh", "-c", " && ".join(shlex.join(c) for c in commands)]


def plain_copy_argv(key, known_hosts, user, peer, copies):
    """One ssh stream per (src, dest): tar on the head, tar on the peer."""
    steps = [
        f"tar -C {src} -cf - . | ssh -i {key} {ssh_options(known_hosts)} {user}@{peer} "
        f"'mkdir -p {dest} && tar -C {dest} -xf -'"
        for src, dest in copies
    ]
    return ["sh", "-c", "set -e; " + "; ".join(steps)]


def inventory_info(inv):
    out = subprocess.run(
        [
            os.path.join(VENV_BIN, "ansible-inventory"),
            "-i",
            inv,
            "--list",
            "--vault-password-file",
            "twin/vault-password",
        ],
        cwd=ROOT,
        env=ansible_env(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    hostvars = json.loads(out)["_meta"]["hostvars"]
    hosts = sorted(hostvars, key=lambda h: int(hostvars[h].get("spark_rank", 0)))
    first = hostvars[hosts[0]]
    return {
        "hosts": hosts,
        "hostvars": hostvars,
        "container": {h: hostvars[h].get("ansible_docker_host", h) for h in hosts},
        "mirror": (
            f"sparksim-{first.get('sparksim_cluster', 'sim')}-mirror"
            if first.get("sparksim_mirror_ipv4")
            else None
        ),
    }


def mirror_call(mirror, route, body=None):
    code = (
        "import sys, urllib.request as u; "
        "d = None if len(sys.argv) < 3 else sys.argv[2].encode(); "
        "print(u.urlopen(u.Request('http://127.0.0.1:8090/_sparksim/' + sys.argv[1], "
        "data=d)).read().decode())"
    )
    argv = [route] + ([json.dumps(body)] if body is not None else [])
    rc, out = on_node(mirror, "python3", "-c", code, *argv)
    try:
        return json.loads(out) if rc == 0 else {}
    except ValueError:
        return {}


def head_manifests(container):
    """The manifests of the revisions staged on the head (not those in flight)."""
    rc, out = on_node(
        container,
        "sh",
        "-c",
        f"find /home /models /srv /data /mnt /opt -name {MANIFEST} 2>/dev/null"
        " | grep -v '[.]partial/' | while read -r m; do printf '%s\\t' \"$m\"; "
        "tr -d '\\n' < \"$m\"; echo; done",
    )
    found = []
    for line in out.splitlines() if rc == 0 else []:
        path, _, text = line.partition("\t")
        try:
            data = json.loads(text)
        except ValueError:
            continue
        found.append({"dir": os.path.dirname(path), **data})
    return found


def weights_served(info):
    """After a cold run: the ratio; None when this twin stages no weights."""
    if not info["mirror"]:
        return None
    manifests = head_manifests(info["container"][info["hosts"][0]])
    if not manifests:
        return None
    return {
        **weights_ratio(mirror_call(info["mirror"], "stats"), manifests),
        "_manifests": manifests,
    }


def measure_fanout(info, manifests, bulk_mb):
    """Role's rsync to every peer at once vs a plain tar|ssh to one peer: model files and
    a bulk file of bulk_mb MB. Leaves nothing behind (bench dirs and the key line go)."""
    hosts, hv = info["hosts"], info["hostvars"]
    head, peers = info["container"][hosts[0]], hosts[1:]
    if not peers:
        return {"skipped": "no peer"}
    ssh_dir = hv[hosts[0]].get("model_weights_ssh_dir", "/etc/sparkfleet/ssh")
    user = hv[hosts[0]].get("model_weights_ssh_user", "root")
    store = os.path.dirname(os.path.dirname(manifests[0]["dir"]))
    known = f"{ssh_dir}/known_hosts.weights"
    key = f"{HEAD_TMP}/plain_ed25519"
    model_bytes = sum(int(f["size"]) for m in manifests for f in m["files"])
    revisions = [
        (m["dir"], f"{BENCH_DIR}/model/{os.path.basename(os.path.dirname(m['dir']))}-{m['commit']}")
        for m in manifests
    ]
    rc, _ = on_node(
        head,
        "sh",
        "-c",
        f"set -e; rm -rf {HEAD_TMP}; mkdir -p {HEAD_TMP}/bulk; "
        f"head -c {bulk_mb * 1000000} /dev/urandom > {HEAD_TMP}/bulk/blob.bin; "
        f"ssh-keygen -q -t ed25519 -N '' -C {PLAIN_COMMENT} -f {key}",
    )
    _, pub = on_node(head, "cat", f"{key}.pub")
    if rc != 0 or not pub:
        return {"skipped": "could not prepare the payload or the plain-copy key on the head"}
    for peer in peers:
        on_node(
            info["container"][peer],
            "sh",
            "-c",
            f"set -e; mkdir -p {store}/{BENCH_DIR}/model {store}/{BENCH_DIR}/bulk; "
            f"h=$(getent passwd {user} | cut -d: -f6); mkdir -p $h/.ssh; chmod 0700 $h/.ssh; "
            f"echo '{pub}' >> $h/.ssh/authorized_keys",
        )
    first_ip = hv[peers[0]]["roce_ipv4"]
    payloads = {
        "model": (model_bytes, revisions),
        "bulk": (bulk_mb * 1000000, [(f"{HEAD_TMP}/bulk", f"{BENCH_DIR}/bulk/blob")]),
    }
    figures = {}
    try:
        for name, (size, copies) in payloads.items():
            fan = [
                one_after_another(
                    [role_rsync_argv(ssh_dir, s, user, hv[p]["roce_ipv4"], d) for s, d in copies]
                )
                for p in peers
            ]
            fan_run = run_parallel(head, fan)
            plain = plain_copy_argv(
                key, known, user, first_ip, [(s, f"{store}/{d}-plain") for s, d in copies]
            )
            plain_run = run_parallel(head, [plain])
            ok = fan_run["ok"] and plain_run["ok"]
            figures[name] = {
                "bytes": size,
                "peers": len(peers),
                "fanout_wall_s": round(fan_run["wall_s"], 2),
                "fanout_mb_s": throughput(size, len(peers), fan_run["wall_s"]) if ok else None,
                "fanout_per_peer_mb_s": throughput(size, 1, fan_run["wall_s"]) if ok else None,
                "plain_wall_s": round(plain_run["wall_s"], 2),
                "plain_mb_s": throughput(size, 1, plain_run["wall_s"]) if ok else None,
                "errors": fan_run["errors"] + plain_run["errors"],
            }
            log(f"fan-out {name}: {figures[name]}")
    finally:
        on_node(head, "rm", "-rf", HEAD_TMP)
        for peer in peers:
            on_node(
                info["container"][peer],
                "sh",
                "-c",
                f"rm -rf {store}/{BENCH_DIR}; h=$(getent passwd {user} | cut -d: -f6); "
                f"sed -i '/ {PLAIN_COMMENT}$/d' $h/.ssh/authorized_keys",
            )
    return figures


def run_parallel(container, jobs):
    rc, out = on_node(container, "python3", "-c", PARALLEL, json.dumps(jobs))
    try:
        data = json.loads(out.splitlines()[-1])
    except (ValueError, IndexError):
        return {"ok": False, "wall_s": None, "errors": [f"rc {rc}: {out[-400:]}"]}
    errors = [j["err"].strip() for j in data["jobs"] if j["rc"] != 0]
    return {"ok": rc == 0 and not errors, "wall_s": data["wall_s"], "errors": errors}


def weights_inventory(size):
    """A twin of `size` nodes with the mirror: the size's own inventory when it stages
    weights, else the first `size` nodes of WEIGHTS_INVENTORY with tp_size/nnodes = size."""
    own = SIZES[size]
    if inventory_has_mirror(own):
        return own
    src = os.path.join(ROOT, WEIGHTS_INVENTORY)
    dst = os.path.join(ROOT, ".cache", "bench", "inventory", f"sim-weights-{size}")
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    write(os.path.join(dst, "hosts.yml"), cut_hosts(read(os.path.join(src, "hosts.yml")), size))
    twin = os.path.join(dst, "group_vars", "spark_nodes", "twin.yml")
    write(twin, resize_profile(read(twin), size))
    for name in os.listdir(os.path.join(dst, "host_vars")):
        if int(re.sub(r"\D", "", name) or 0) > size:
            os.remove(os.path.join(dst, "host_vars", name))
    return dst


def inventory_has_mirror(inv):
    for dirpath, _, names in os.walk(os.path.join(ROOT, inv)):
        for name in names:
            if "sparksim_mirror_ipv4:" in read(os.path.join(dirpath, name)):
                return True
    return False


def cut_hosts(text, size):
    """hosts.yml of spark-1..spark-<size> (the inventories name nodes spark-N, rank N-1)."""
    keep, out = True, []
    for line in text.splitlines(keepends=True):
        m = re.match(r"^    (spark-(\d+)):\s*$", line)
        if m:
            keep = int(m.group(2)) <= size
        elif re.match(r"^\S", line) or re.match(r"^  \S", line):
            keep = True
        if keep:
            out.append(line)
    return "".join(out)


def resize_profile(text, size):
    text, tp = re.subn(r"(?m)^(  tp_size:) \d+$", rf"\1 {size}", text)
    text, nn = re.subn(r"(?m)^(  nnodes:) \d+$", rf"\1 {size}", text)
    if tp != 1 or nn != 1:
        raise ValueError("twin.yml: expected one tp_size and one nnodes line to resize")
    return text


def read(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def section_weights(ctx):
    bulk_mb = int(os.environ.get("BENCH_FANOUT_MB", "64"))
    for size in ctx.weights_sizes or ctx.sizes:
        if str(size) in ctx.weights:
            continue  # measured on the provisioning run's twin, or resumed
        inv = weights_inventory(size)
        with ctx.twin_lock(f"{size} nodes, weights"):
            ctx.playbook(inv, "twin/playbooks/destroy.yml", f"w{size}-destroy")
            rc, _, _ = ctx.playbook(inv, "twin/playbooks/create.yml", f"w{size}-create")
            if rc == 0:
                rc, _, _ = ctx.playbook(inv, "site.yml", f"w{size}-cold", "--tags", "weights")
            if rc == 0:
                measure_weights(ctx, size, inv, "cold")
                rc, _, _ = ctx.playbook(inv, "site.yml", f"w{size}-nochange", "--tags", "weights")
                if rc == 0:
                    measure_weights(ctx, size, inv, "nochange")
                    measure_weights(ctx, size, inv, "fanout", bulk_mb=bulk_mb)
            ctx.playbook(inv, "twin/playbooks/destroy.yml", f"w{size}-destroy-end")
        ctx.checkpoint("weights", {"partial": True, "sizes": ctx.weights})
    sizes = {k: ctx.weights[k] for k in sorted(ctx.weights, key=int)}
    return {
        "title": "Weights (mirror bytes and the fan-out, on the twin)",
        "data": {"sizes": sizes, "fanout_bulk_mb": bulk_mb},
        "table": weights_table(sizes, bulk_mb, ctx.runs),
    }


def measure_weights(ctx, size, inv, step, bulk_mb=None):
    """Called while the twin of `size` is up: after a cold run ("cold": the ratio), after
    the no-change run ("nochange": bytes served since), then "fanout". Never raises:
    a figure that cannot be read is left out with a note."""
    entry = ctx.weights.setdefault(str(size), {"inventory": inv, "runs": []})
    try:
        info = ctx.inventories.get(inv) or inventory_info(inv)
        ctx.inventories[inv] = info
        if step == "cold":
            served = weights_served(info)
            if served is None:
                ctx.weights.pop(str(size), None)  # this twin stages no weights
                return
            entry["_manifests"] = served.pop("_manifests")
            entry["runs"].append(served)
            mirror_call(info["mirror"], "reset")
        elif step == "nochange" and entry["runs"]:
            stats = mirror_call(info["mirror"], "stats")
            entry["runs"][-1]["nochange_served_bytes"] = sum(
                int(e.get("bytes", 0)) for e in (stats.get("files") or {}).values()
            )
        elif step == "fanout" and entry.get("_manifests"):
            entry["fanout"] = measure_fanout(info, entry.pop("_manifests"), bulk_mb)
    except (subprocess.CalledProcessError, OSError, ValueError, KeyError) as exc:
        log(f"weights {size} nodes, {step}: not measured ({exc})")
        entry.setdefault("notes", []).append(f"{step}: {exc}")


def weights_table(sizes, bulk_mb, runs):
    lines = [
        "| nodes | model bytes | mirror bytes served (cold) | served / model | "
        "served on the no-change run | fan-out: model files, s | plain copy, s | "
        f"fan-out {bulk_mb} MB: aggregate MB/s (per peer) | plain copy {bulk_mb} MB, MB/s |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for size, s in sizes.items():
        runs_ = s.get("runs") or []
        ratios = [r["ratio"] for r in runs_ if r.get("ratio") is not None]
        fan = s.get("fanout") or {}
        model, bulk = fan.get("model") or {}, fan.get("bulk") or {}
        lines.append(
            f"| {size} | {runs_[0]['model_bytes'] if runs_ else 'n/a'} | "
            f"{', '.join(str(r['served_bytes']) for r in runs_) or 'n/a'} | "
            f"{', '.join(f'{x:.3f}' for x in ratios) or 'n/a'} | "
            f"{', '.join(str(r.get('nochange_served_bytes', 'n/a')) for r in runs_) or 'n/a'} | "
            f"{num(model.get('fanout_wall_s'))} | {num(model.get('plain_wall_s'))} | "
            f"{num(bulk.get('fanout_mb_s'))} ({num(bulk.get('fanout_per_peer_mb_s'))}) | "
            f"{num(bulk.get('plain_mb_s'))} |"
        )
    lines += resumed_note(sizes)
    lines += [
        "",
        f"{runs} run(s) per size; served / model target 1.0 (each file crosses the mirror "
        "link once per cluster). Bytes are body bytes the twin mirror's front counted per "
        "file; model bytes are the staged revisions' manifests on the head (main model and "
        "draft). Fan-out: the role's own rsync (fan-out key, pinned host keys, rrsync on "
        "the peers) from the head to every peer at once (one peer's revisions one after "
        "another, as in the plain copy); aggregate MB/s = bytes x peers / "
        "wall time. Plain copy: one `tar | ssh` stream to one peer over the same data-plane "
        "network. The twin's model is about 1 MB, so its transfers are handshakes; the "
        f"{bulk_mb} MB file shows the bandwidth, which on the twin is the head's share of "
        "2 shared cores (ssh encryption), not a link.",
    ]
    return lines


def num(value):
    return "n/a" if value is None else f"{value:g}"


RECOVERY_FAULTS = [
    # (name, node, command run on that node)
    ("head kill", "spark-1", "docker kill qwen38-tp4-r0"),
    ("worker kill", "spark-3", "docker kill qwen38-tp4-r2"),
    ("wedge (head frozen with docker pause)", "spark-1", "docker pause qwen38-tp4-r0"),
]
PROBE = os.path.join(ROOT, "molecule", "default", "wd_probe.py")


def on_node(node, *argv, stdin=None):
    proc = subprocess.run(
        ["docker", "exec", "-i", node, *argv],
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
    )
    return proc.returncode, proc.stdout.strip()


def probe(*args):
    with open(PROBE, encoding="utf-8") as handle:
        rc, out = on_node("spark-1", "python3", "-", *args, stdin=handle.read())
    try:
        return json.loads(out), rc
    except ValueError:
        return {}, rc or 1


def section_recovery(ctx):
    """The watchdog with the real cron on the 4-node twin: inject a fault on a healthy
    cluster, wait for the restart the watchdog decides (state.json), and split the
    times: crash->decision, crash->healthy, and decision->healthy less the engine's
    own boot (the head container's start to /health 200) = orchestration overhead."""
    inv = SIZES[4]
    rows = {name: [] for name, _, _ in RECOVERY_FAULTS}
    with ctx.twin_lock("4 nodes, recovery"):
        ctx.playbook(inv, "twin/playbooks/destroy.yml", "recovery-destroy")
        rc, _, _ = ctx.playbook(inv, "twin/playbooks/create.yml", "recovery-create")
        if rc == 0:
            rc, _, _ = ctx.playbook(inv, "site.yml", "recovery-site")
        if rc != 0:
            return ctx.skip("the 4-node twin did not come up: see the logs")
        _, cfg = on_node("spark-1", "cat", "/etc/sparkfleet/cluster.json")
        grace = json.loads(cfg)["watchdog"]["grace_s"] if cfg else None
        for run in range(1, ctx.runs + 1):
            for name, node, command in RECOVERY_FAULTS:
                on_node("spark-1", "/usr/local/sbin/sparkfleet-watchdog", "clear")
                # A watchdog run ends with the restart it made; the next one starts at the
                # next cron minute. Measure from a watchdog that is observing again (a
                # healthy observation after the clear), not from that gap.
                cleared_at = probe("now")[0].get("now")
                probe("obs", str(cleared_at), "healthy", "130")
                crash_at = probe("now")[0].get("now")
                on_node(node, "sh", "-c", command)
                snap, rc = probe("restart", str(crash_at), "400")
                hit = snap.get("hit") or {}
                _, started = on_node(
                    "spark-1", "docker", "inspect", "-f", "{{.State.StartedAt}}", "qwen38-tp4-r0"
                )
                head_started = docker_epoch(started)
                if rc != 0 or hit.get("rc") != 0 or head_started is None:
                    log(f"recovery {name} run {run}: no healthy restart ({snap.get('state', {})})")
                    ctx.failures.append(f"recovery: {name} run {run} did not heal")
                    continue
                boot = hit["healthy_at"] - head_started
                rows[name].append(
                    {
                        "crash_to_decision_s": hit["time"] - crash_at,
                        "crash_to_healthy_s": hit["healthy_at"] - crash_at,
                        "decision_to_healthy_s": hit["healthy_at"] - hit["time"],
                        "engine_boot_s": boot,
                        "overhead_s": hit["healthy_at"] - hit["time"] - boot,
                    }
                )
                log(f"recovery {name} run {run}: {rows[name][-1]}")
                ctx.checkpoint("recovery", {"partial": True, "faults": rows})
        ctx.playbook(inv, "twin/playbooks/destroy.yml", "recovery-destroy-end")
    keys = [
        "crash_to_decision_s",
        "crash_to_healthy_s",
        "engine_boot_s",
        "overhead_s",
    ]
    data = {name: {k: spread([r[k] for r in runs]) for k in keys} for name, runs in rows.items()}
    lines = [
        "| fault | crash -> decision, s | crash -> healthy, s | engine boot, s | "
        "orchestration overhead, s |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, figures in data.items():
        lines.append(f"| {name} | " + " | ".join(fmt_spread(figures[k]) for k in keys) + " |")
    lines += [
        "",
        f"Median (min-max) of {ctx.runs} run(s). The watchdog observes every "
        "`watchdog_interval_s` (5 s on the twin) inside its cron minute and acts once a bad "
        "observation is confirmed `watchdog_confirm_after_s` (2 s) later; each fault is "
        "injected after a healthy observation (a run that restarted the cluster ends, and "
        "the next starts at the next cron minute); a frozen head counts "
        "as wedged only once it is older than "
        f"`watchdog_grace_s` ({grace} s on the twin), so its crash -> decision includes that "
        "wait. Engine boot: the head container's start to `/health` 200 (the stand-in's own "
        "boot); overhead: decision -> healthy less that boot (evidence, checks, stop, ordered "
        "start over SSH). Targets: crash -> decision <= 20 s median, overhead <= 15 s.",
    ]
    return {"title": "Recovery (the watchdog on the 4-node twin)", "data": data, "table": lines}


def docker_epoch(text):
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?Z$", text.strip())
    if not m:
        return None
    base = dt.datetime.fromisoformat(m.group(1) + "+00:00").timestamp()
    return base + (float("0" + m.group(2)) if m.group(2) else 0.0)


SECTIONS = [
    Section("provisioning", section_provisioning),
    Section("weights", section_weights, needs="roles/model_weights"),
    Section("recovery", section_recovery, needs="roles/watchdog"),
]


# ---- report -------------------------------------------------------------------


def markdown(results):
    load = results.get("load_avg") or {}
    lines = [
        f"Run {results['started']} ({results['duration_s']:.0f} s, {results['host']}), "
        f"{results['runs']} run(s) per figure. Machine load average (1, 5, 15 min) at the "
        f"start {fmt_load(load.get('start'))}, at the end {fmt_load(load.get('end'))}: the "
        "machine is shared with other twins and builds, so wall times include queueing "
        "for its cores."
    ]
    for name, sec in results["sections"].items():
        lines += ["", f"### {sec.get('title', name.capitalize())}", ""]
        if "skipped" in sec:
            lines.append(f"Skipped: {sec['skipped']}.")
        else:
            lines += sec["table"]
    return "\n".join(lines) + "\n"


def fmt_load(values):
    return "n/a" if not values else " / ".join(f"{v:.2f}" for v in values)


def write(path, text):
    tmp = path + ".partial"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, path)


def update_docs(table):
    path = os.path.join(ROOT, DOCS_PAGE)
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    if DOCS_START not in text or DOCS_END not in text:
        log(f"{DOCS_PAGE} has no bench markers: table not copied there")
        return
    head, rest = text.split(DOCS_START, 1)
    _, tail = rest.split(DOCS_END, 1)
    write(path, f"{head}{DOCS_START}\n{table}{DOCS_END}{tail}")


def resumed_sizes(path, section="provisioning"):
    """Sizes a section measured in an interrupted run, each marked with that run."""
    if not path:
        return {}
    with open(path, encoding="utf-8") as handle:
        done = json.load(handle)
    stamp = os.path.basename(path).split(".", 1)[0]
    sizes = (done.get(section) or {}).get("sizes") or {}
    return {k: {**v, "from_run": v.get("from_run", stamp)} for k, v in sizes.items()}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    p.add_argument("--runs", type=int, default=int(os.environ.get("BENCH_RUNS", "3")))
    p.add_argument("--sizes", default=os.environ.get("BENCH_SIZES", "2,4,8"))
    p.add_argument(
        "--sections", default=os.environ.get("BENCH_SECTIONS", ",".join(s.name for s in SECTIONS))
    )
    p.add_argument("--lock", default=default_lock())
    p.add_argument(
        "--weights-sizes",
        default=os.environ.get("BENCH_WEIGHTS_SIZES", ""),
        help="sizes of the weights section (default: --sizes)",
    )
    p.add_argument(
        "--resume",
        default=os.environ.get("BENCH_RESUME", ""),
        help="a <stamp>.partial.json of an interrupted run: its measured provisioning sizes "
        "are kept (marked with their run) and not measured again",
    )
    p.add_argument("--out-dir", default=os.path.join(ROOT, "bench", "results"))
    p.add_argument("--no-docs", action="store_true", help=f"do not copy the table into {DOCS_PAGE}")
    args = p.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    bad = [s for s in sizes if s not in SIZES]
    if bad:
        p.error(f"--sizes: no twin inventory for {bad}; known: {sorted(SIZES)}")
    wanted = [s for s in args.sections.split(",") if s]
    unknown = sorted(set(wanted) - {s.name for s in SECTIONS})
    if unknown:
        p.error(f"--sections: unknown {unknown}; known: {[s.name for s in SECTIONS]}")
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    os.makedirs(args.out_dir, exist_ok=True)
    logs_dir = os.path.join(ROOT, ".cache", "bench", stamp)
    os.makedirs(logs_dir, exist_ok=True)
    ctx = Context(
        partial_path=os.path.join(args.out_dir, f"{stamp}.partial.json"),
        runs=args.runs,
        sizes=sizes,
        lock_path=args.lock,
        out_dir=args.out_dir,
        logs_dir=logs_dir,
        wanted=wanted,
        weights_sizes=[int(s) for s in args.weights_sizes.split(",") if s],
        resumed=resumed_sizes(args.resume),
        weights=resumed_sizes(args.resume, "weights"),
    )
    started = time.monotonic()
    results = {
        "started": stamp,
        "host": f"{os.uname().nodename}, {os.cpu_count()} cores",
        "runs": args.runs,
        "load_avg": {"start": load_averages()},
        "sections": {},
    }
    for section in SECTIONS:
        if section.name not in wanted:
            continue
        if section.needs and not os.path.exists(os.path.join(ROOT, section.needs)):
            results["sections"][section.name] = ctx.skip(f"{section.needs} is not in this checkout")
        else:
            log(f"section {section.name}")
            results["sections"][section.name] = section.func(ctx)
    results["duration_s"] = round(time.monotonic() - started, 1)
    results["load_avg"]["end"] = load_averages()
    results["failures"] = ctx.failures
    table = markdown(results)
    write(os.path.join(args.out_dir, f"{stamp}.json"), json.dumps(results, indent=2) + "\n")
    with contextlib.suppress(OSError):
        os.remove(ctx.partial_path)
    write(os.path.join(args.out_dir, f"{stamp}.md"), table)
    write(os.path.join(args.out_dir, "latest.md"), table)
    if not args.no_docs:
        update_docs(table)
    print(table)
    log(f"results: {args.out_dir}/{stamp}.json, logs: {logs_dir}")
    if ctx.failures:
        log("failed playbooks: " + "; ".join(ctx.failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
