"""Controller side of drill.yml: the figures of one drill run, as JSON, Markdown and a PNG.

Reads {"run": {...}, "drills": [...], "events": [...]} on stdin:
  drills: one row per drill as the role recorded it (name, node, fault, what, ready_at,
          fault_at, done_at, healed, undone, error, restarts: the watchdog's state.json
          entries labelled with this drill);
  events: the steady client's request outcomes ({"t0", "t1", "ok", "status", "error"}).
Writes drill.json, drill.md and drill.png into --out-dir, prints one summary line per drill.
Every time is the head's clock (the watchdog's and the client's), in epoch seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def requests_in(events, start, end):
    """The requests sent within [start, end)."""
    return [e for e in events if start <= e["t0"] < end]


def longest_gap(events, start, end):
    """The longest time within [start, end] with no answered request (seconds)."""
    answers = sorted(e["t1"] for e in events if e["ok"] and start <= e["t1"] <= end)
    marks = [start, *answers, end]
    return round(max(b - a for a, b in zip(marks, marks[1:])), 1) if end > start else 0.0


def drill_figures(row, events):
    """The measured figures of one drill (what the Markdown row and the JSON hold)."""
    start, end = row["ready_at"], row.get("done_at") or row["ready_at"]
    sent = requests_in(events, start, end)
    failed = [e for e in sent if not e["ok"]]
    restarts = row.get("restarts") or []
    counted = [r for r in restarts if not r.get("transient")]
    heal = next((r for r in reversed(restarts) if r.get("rc") == 0), None)
    # Detected and decided: the watchdog's first bad observation and first restart decision
    # for this drill (a node still booting defers the restart; the heal is a later attempt).
    first = restarts[0] if restarts else None
    fault = row.get("fault_at")
    healthy_at = heal.get("healthy_at") if heal else None
    # The blip: from the fault to the heal (the head answering /health again). A request that
    # failed outside it, before the fault or after the heal, is a request lost.
    lost = [
        e
        for e in failed
        if fault is None or healthy_at is None or e["t1"] < fault or e["t0"] > healthy_at
    ]

    def since_fault(value):
        return round(value - fault, 1) if value is not None and fault is not None else None

    return {
        "drill": row["name"],
        "node": row["node"],
        "what": row.get("what", ""),
        "healed": bool(row.get("healed")),
        "fault_at": fault,
        "detected_s": since_fault(first.get("detected_at") if first else None),
        "decided_s": since_fault(first.get("time") if first else None),
        "healthy_s": since_fault(healthy_at),
        "restarts": len(counted),
        "deferred": len(restarts) - len(counted),
        "kind": heal.get("kind") if heal else None,
        "evidence": heal.get("incident") if heal else None,
        "sent": len(sent),
        "answered": len(sent) - len(failed),
        "failed": len(failed),
        "lost_outside_blip": len(lost),
        "longest_gap_s": longest_gap(events, start, end),
        "undone": row.get("undone", ""),
        "error": row.get("error", ""),
    }


def markdown(run, figures):
    lines = [
        f"# Fault drills {run.get('run_id', '')} on {run.get('cluster', '')}",
        "",
        f"Steady load: {run.get('concurrency')} request(s) in flight, "
        f"{run.get('max_tokens')} tokens each, against {run.get('url', '')}. Times in seconds "
        "after the fault; the gap is the longest time without an answered request.",
        "",
        "| drill | node | healed | detected | decided | healthy | restarts | sent | answered "
        "| failed | lost outside the blip | longest gap | undone |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def cell(value):
        return "-" if value is None else str(value)

    for f in figures:
        lines.append(
            "| {drill} | {node} | {healed} | {d} | {c} | {h} | {restarts} | {sent} | {answered} "
            "| {failed} | {lost_outside_blip} | {longest_gap_s} | {undone} |".format(
                d=cell(f["detected_s"]),
                c=cell(f["decided_s"]),
                h=cell(f["healthy_s"]),
                **dict(f, healed="yes" if f["healed"] else "NO", undone=f["undone"] or "-"),
            )
        )
    evidence = [f"- {f['drill']}: {f['evidence']}" for f in figures if f["evidence"]]
    if evidence:
        lines += [
            "",
            "Evidence the watchdog kept (every rank's log tail, stack dumps), on the head:",
        ]
        lines += evidence
    errors = [f"- {f['drill']}: {f['error']}" for f in figures if f["error"]]
    if errors:
        lines += ["", "Errors:", *errors]
    return "\n".join(lines) + "\n"


def summary_line(f):
    if not f["healed"]:
        return (
            f"{f['drill']} on {f['node']}: NOT healed ({f['error'] or 'no heal within the bound'})"
        )
    return (
        f"{f['drill']} on {f['node']}: healed, {f['kind']} decided {f['decided_s']} s and healthy "
        f"{f['healthy_s']} s after the fault; {f['answered']}/{f['sent']} requests answered, "
        f"{f['lost_outside_blip']} lost outside the blip, longest gap {f['longest_gap_s']} s"
    )


def chart(run, figures, events, path):
    """Request outcomes over time, each drill's fault and heal marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t0 = min([e["t0"] for e in events] + [f["fault_at"] for f in figures if f["fault_at"]] or [0])
    fig, ax = plt.subplots(figsize=(11, 3.6))
    ok = [(e["t1"] - t0, e["t1"] - e["t0"]) for e in events if e["ok"]]
    bad = [(e["t1"] - t0, e["t1"] - e["t0"]) for e in events if not e["ok"]]
    if ok:
        ax.scatter(*zip(*ok), s=6, color="tab:green", label="answered (latency)")
    if bad:
        ax.scatter(*zip(*bad), s=14, marker="x", color="tab:red", label="failed")
    for f in figures:
        if f["fault_at"] is None:
            continue
        x = f["fault_at"] - t0
        ax.axvline(x, color="tab:red", linestyle="--", linewidth=1)
        ax.text(x, ax.get_ylim()[1] * 0.95, " " + f["drill"], rotation=90, va="top", fontsize=8)
        if f["healthy_s"] is not None:
            ax.axvspan(x, x + f["healthy_s"], color="tab:orange", alpha=0.15)
            ax.axvline(x + f["healthy_s"], color="tab:green", linestyle=":", linewidth=1)
    ax.set_xlabel("seconds since the first request")
    ax.set_ylabel("request latency, s")
    ax.set_title(
        f"Fault drills {run.get('run_id', '')} on {run.get('cluster', '')}: "
        "fault (dashed), blip (shaded), healthy (dotted)"
    )
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out-dir", required=True)
    args = parser.parse_args(argv)
    data = json.load(sys.stdin)
    events = data.get("events") or []
    figures = [drill_figures(row, events) for row in data.get("drills") or []]
    os.makedirs(args.out_dir, exist_ok=True)
    report = {"run": data.get("run") or {}, "drills": figures, "requests": len(events)}
    for name, text in (
        ("drill.json", json.dumps(report, indent=2, sort_keys=True) + "\n"),
        ("drill.md", markdown(report["run"], figures)),
    ):
        with open(os.path.join(args.out_dir, name + ".partial"), "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(os.path.join(args.out_dir, name + ".partial"), os.path.join(args.out_dir, name))
    png = os.path.join(args.out_dir, "drill.png")
    try:
        chart(report["run"], figures, events, png + ".partial.png")
        os.replace(png + ".partial.png", png)
    except ImportError as exc:
        print(
            f"drill.png not written: {exc}; fix: install matplotlib into the controller's Python "
            f"({sys.executable} -m pip install matplotlib)"
        )
    for f in figures:
        print(summary_line(f))
    print(f"results: {args.out_dir}/drill.{{md,json,png}}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
