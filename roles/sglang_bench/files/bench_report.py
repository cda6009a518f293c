"""Controller side of bench.yml: JSON, Markdown table and PNG chart of one run.

Reads {"figures": <sparkfleet-bench output>, "run": <cluster, profile, image,
patches>} on stdin, writes bench.json, bench.md and bench.png into --out-dir
(created; files written whole via a temporary name), prints the directory and
the table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def fmt(value, digits=1):
    return "n/a" if value is None else f"{value:.{digits}f}"


def span(fig):
    if not fig:
        return "n/a"
    return f"{fig['min']:.1f}-{fig['max']:.1f}"


def markdown(report):
    fig, run = report["figures"], report["run"]
    settings = fig["settings"]
    types = [t for t in settings["types"] if t in fig["single_stream"]]
    lines = [
        f"# Engine benchmark: {run['served_model_name']} ({run['profile']}, {run['nodes']} nodes)",
        "",
        f"Single-stream greedy (temperature {settings['temperature']:g}) median decode throughput: "
        f"**{fmt(fig['single_stream_median_decode_tok_s'])} tok/s** over "
        f"{sum(fig['single_stream'][t]['prompts'] for t in types)} prompts "
        f"({' / '.join(types)}), time to first token excluded. By content type:",
        "",
        "| content | prompts | decode tok/s median | range (min-max) | TTFT p50 ms | "
        "ITL p50 ms | ITL p99 ms |",
        "|---|---:|---:|---|---:|---:|---:|",
    ]
    for t in types:
        s = fig["single_stream"][t]
        d = s["decode_tok_s"] or {}
        lines.append(
            f"| {t} | {s['prompts']} | {fmt(d.get('median'))} | {span(s['decode_tok_s'])} | "
            f"{fmt((s['ttft_ms'] or {}).get('p50'))} | {fmt((s['itl_ms'] or {}).get('p50'), 2)} | "
            f"{fmt((s['itl_ms'] or {}).get('p99'), 2)} |"
        )
    lines += [
        "",
        "Multi-stream aggregate (total decode tokens/s across N concurrent requests):",
        "",
        "| concurrency | rounds | aggregate tok/s median | range (min-max) | per request tok/s | "
        "TTFT p50 / p90 / p99 ms | ITL p50 / p90 / p99 ms |",
        "|---:|---:|---:|---|---:|---|---|",
    ]
    for level, c in fig["concurrency"].items():
        agg = c["aggregate_tok_s"] or {}
        ttft = c["ttft_ms"] or {}
        itl = c["itl_ms"] or {}
        lines.append(
            f"| C{level} | {c['rounds']} | {fmt(agg.get('median'))} | "
            f"{span(c['aggregate_tok_s'])} | "
            f"{fmt(c['per_request_decode_tok_s']['median'])} | "
            f"{fmt(ttft.get('p50'))} / {fmt(ttft.get('p90'))} / {fmt(ttft.get('p99'))} | "
            f"{fmt(itl.get('p50'), 2)} / {fmt(itl.get('p90'), 2)} / {fmt(itl.get('p99'), 2)} |"
        )
    patches = ", ".join(
        f"{os.path.basename(p['file'])} {str(p.get('dest_sha256'))[:12]}"
        for p in run.get("patches") or []
    )
    lines += [
        "",
        f"Run {fig['started']} ({fig['duration_s']} s) with {fig['tool']['name']} "
        f"{fig['tool']['version']} on {run['head']} against {settings['base_url']}; "
        f"max_tokens {settings['max_tokens']}, seed {settings['seed']}, "
        f"{settings['per_type']} prompts per type, {settings['rounds']} rounds per level. "
        f"Image {run['image']} ({str(run.get('image_id'))[:19]}), "
        f"launch {run.get('config_hash') or 'n/a'}, "
        f"patches: {patches or 'none recorded'}.",
        "",
    ]
    return "\n".join(lines)


def chart(report, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, run = report["figures"], report["run"]
    types = [
        t for t in fig["settings"]["types"] if fig["single_stream"].get(t, {}).get("decode_tok_s")
    ]
    levels = [lvl for lvl, c in fig["concurrency"].items() if c["aggregate_tok_s"]]
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    medians = [fig["single_stream"][t]["decode_tok_s"]["median"] for t in types]
    lows = [m - fig["single_stream"][t]["decode_tok_s"]["min"] for t, m in zip(types, medians)]
    highs = [fig["single_stream"][t]["decode_tok_s"]["max"] - m for t, m in zip(types, medians)]
    left.bar(types, medians, yerr=[lows, highs], capsize=4, color="#4c72b0")
    left.set_title("Single-stream greedy decode (TTFT excluded)")
    left.set_ylabel("tok/s (median, min-max)")
    for x, m in enumerate(medians):
        left.annotate(f"{m:.1f}", (x, m), ha="center", va="bottom", fontsize=8)
    agg = [fig["concurrency"][lvl]["aggregate_tok_s"] for lvl in levels]
    xs = [int(lvl) for lvl in levels]
    right.errorbar(
        xs,
        [a["median"] for a in agg],
        yerr=[[a["median"] - a["min"] for a in agg], [a["max"] - a["median"] for a in agg]],
        marker="o",
        capsize=4,
        color="#dd8452",
    )
    right.set_xscale("log", base=2)
    right.set_xticks(xs, [f"C{x}" for x in xs])
    right.set_title("Aggregate decode vs concurrency")
    right.set_ylabel("tok/s (median, min-max)")
    right.set_ylim(bottom=0)
    figure.suptitle(
        f"{run['served_model_name']} · {run['profile']} · {run['nodes']} nodes · {fig['started']}"
    )
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def write(path, text):
    tmp = path + ".partial"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, path)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    p.add_argument("--out-dir", required=True)
    args = p.parse_args(argv)
    report = json.load(sys.stdin)
    os.makedirs(args.out_dir, exist_ok=True)
    write(os.path.join(args.out_dir, "bench.json"), json.dumps(report, indent=2) + "\n")
    table = markdown(report)
    write(os.path.join(args.out_dir, "bench.md"), table)
    try:
        png = os.path.join(args.out_dir, "bench.png")
        chart(report, png + ".partial.png")
        os.replace(png + ".partial.png", png)
    except ImportError as exc:
        print(
            f"bench.png not written: {exc}; fix: install matplotlib into the controller's Python "
            f"({sys.executable} -m pip install matplotlib)",
            file=sys.stderr,
        )
        return 1
    print(f"results: {os.path.abspath(args.out_dir)}")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
