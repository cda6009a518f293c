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
bench/results/<stamp>.json and .md, bench/results/latest.md, and the README block
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
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV_BIN = os.path.join(ROOT, ".venv", "bin")
SIZES = {2: "inventory/sim-2node", 4: "inventory/sim", 8: "inventory/sim-8node"}
README_START = "<!-- bench:start (written by make bench) -->"
README_END = "<!-- bench:end -->"
RECAP = re.compile(
    r"^(?P<host>\S+)\s+:\s+ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+unreachable=(?P<unreachable>\d+)"
    r"\s+failed=(?P<failed>\d+)\s+skipped=(?P<skipped>\d+)"
)
# One line per connection call at -vvv: the docker connections print
# "<spark-1> EXEC [...]", "<spark-1> PUT ...", ssh prints "<host> SSH: EXEC ssh ...".
ROUND_TRIP = re.compile(r"^<(?P<host>[^>]+)> (?:SSH: )?(?P<op>EXEC|PUT|FETCH)\b")
PROFILE_LINE = re.compile(r"^(?P<task>.+?) -{2,} (?P<secs>\d+\.\d+)s$")


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
        full_env = dict(os.environ)
        full_env.update(
            PATH=VENV_BIN + os.pathsep + os.environ.get("PATH", ""),
            ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
            ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".collections"),
            ANSIBLE_NOCOLOR="1",
        )
        full_env.update(env or {})
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


# ---- sections ---------------------------------------------------------------


def section_provisioning(ctx):
    sizes = {}
    for size in ctx.sizes:
        inv = SIZES[size]
        cold, warm, warm_cpu, changed, load = [], [], [], [], []
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
                rc, secs, out = ctx.playbook(inv, "site.yml", f"n{size}-r{run}-nochange")
                if rc != 0:
                    break
                warm.append(secs)
                warm_cpu.append(ctx.last_cpu)
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
            ctx.playbook(inv, "twin/playbooks/destroy.yml", f"n{size}-destroy")
        sizes[str(size)] = {
            "inventory": inv,
            "cold_s": spread(cold),
            "nochange_s": spread(warm),
            "nochange_controller_cpu_s": spread(warm_cpu),
            "nochange_changed": changed,
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
    }


def fmt_spread(s):
    return "n/a" if not s else f"{s['median']:.1f} ({s['min']:.1f}-{s['max']:.1f})"


def provisioning_table(sizes, ratio, runs):
    lines = [
        "| nodes | cold site.yml to healthy, s | no-change re-run, s | changed on re-run | "
        "tasks / host | round-trips / host | load avg |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for size, s in sizes.items():
        tph = s.get("tasks_per_host") or {}
        rtt = s.get("round_trips_per_host") or {}
        lines.append(
            f"| {size} | {fmt_spread(s['cold_s'])} | {fmt_spread(s['nochange_s'])} | "
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
        "ok + changed of the busiest host; round-trips min-max over hosts.",
    ]
    for size, s in sizes.items():
        if s.get("slowest_tasks"):
            lines += ["", f"Slowest tasks of the {size}-node no-change run (profile_tasks):", ""]
            lines += [f"- {t['s']:.2f} s {t['task']}" for t in s["slowest_tasks"][:8]]
    return lines


def section_weights(ctx):
    # Hook for the weights stage: once roles/model_weights lands, measure mirror
    # bytes served / model bytes for 2, 4 and 8 nodes (target 1.0) and the fan-out
    # throughput vs a plain copy on the same network, and return a table here.
    return ctx.skip("roles/model_weights is not in this checkout: nothing to measure yet")


RECOVERY_FAULTS = [
    # (name, node, command run on that node)
    ("head kill", "spark-1", "docker kill qwen38-tp4-r0"),
    ("worker kill", "spark-3", "docker kill qwen38-tp4-r2"),
    ("wedge (head frozen with docker pause)", "spark-1", "docker pause qwen38-tp4-r0"),
]
PROBE = os.path.join(ROOT, "molecule", "default", "wd_probe.py")


def on_node(node, *argv, stdin=None):
    proc = subprocess.run(
        ["docker", "exec", "-i", node, *argv], input=stdin, capture_output=True, text=True
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
        "`watchdog_interval_s` (5 s on the twin) inside its cron minute and acts after two bad "
        "observations; a frozen head counts as wedged only once it is older than "
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
    lines = [f"Run {results['started']} ({results['duration_s']:.0f} s, {results['host']})."]
    for name, sec in results["sections"].items():
        lines += ["", f"### {sec.get('title', name.capitalize())}", ""]
        if "skipped" in sec:
            lines.append(f"Skipped: {sec['skipped']}.")
        else:
            lines += sec["table"]
    return "\n".join(lines) + "\n"


def write(path, text):
    tmp = path + ".partial"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, path)


def update_readme(table):
    path = os.path.join(ROOT, "README.md")
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    if README_START not in text or README_END not in text:
        log("README.md has no bench markers: table not copied there")
        return
    head, rest = text.split(README_START, 1)
    _, tail = rest.split(README_END, 1)
    write(path, f"{head}{README_START}\n{table}{README_END}{tail}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    p.add_argument("--runs", type=int, default=int(os.environ.get("BENCH_RUNS", "3")))
    p.add_argument("--sizes", default=os.environ.get("BENCH_SIZES", "2,4,8"))
    p.add_argument(
        "--sections", default=os.environ.get("BENCH_SECTIONS", ",".join(s.name for s in SECTIONS))
    )
    p.add_argument("--lock", default="/tmp/sparkfleet-twin.lock")
    p.add_argument("--out-dir", default=os.path.join(ROOT, "bench", "results"))
    p.add_argument("--no-readme", action="store_true", help="do not copy the table into README.md")
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
    )
    started = time.monotonic()
    results = {
        "started": stamp,
        "host": f"{os.uname().nodename}, {os.cpu_count()} cores",
        "runs": args.runs,
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
    results["failures"] = ctx.failures
    table = markdown(results)
    write(os.path.join(args.out_dir, f"{stamp}.json"), json.dumps(results, indent=2) + "\n")
    with contextlib.suppress(OSError):
        os.remove(ctx.partial_path)
    write(os.path.join(args.out_dir, f"{stamp}.md"), table)
    write(os.path.join(args.out_dir, "latest.md"), table)
    if not args.no_readme:
        update_readme(table)
    print(table)
    log(f"results: {args.out_dir}/{stamp}.json, logs: {logs_dir}")
    if ctx.failures:
        log("failed playbooks: " + "; ".join(ctx.failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
