"""The bench's own arithmetic and reports: the engine driver's reductions, the
controller report (Markdown, PNG), the prompt set, and make bench's log parsing."""

from __future__ import annotations

import importlib.util
import json
import os
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
FILES = os.path.join(ROOT, "roles", "sglang_bench", "files")


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


driver = load("sparkfleet_bench", os.path.join(FILES, "sparkfleet-bench.py"))
report = load("bench_report", os.path.join(FILES, "bench_report.py"))
make_bench = load("make_bench", os.path.join(ROOT, "tools", "bench.py"))


class Result:
    """What llama_benchy.client.run_generation returns (the fields the driver reads)."""

    def __init__(self, start, stamps):
        self.start_ts = start
        self.first_token_ts = stamps[0] if stamps else None
        self.token_timestamps = stamps
        self.total_tokens = len(stamps)
        self.error = None


@pytest.mark.parametrize(
    ("stamps", "decode", "tok_s"),
    [
        # 11 tokens 0.1 s apart: 10 after the first in 1.0 s; TTFT (0.5 s) is not in it.
        ([0.5 + i / 10 for i in range(11)], 10, 10.0),
        # Two tokens in the first chunk (same stamp): only what follows the first stamp counts.
        ([1.0, 1.0, 1.5, 2.0], 2, 2.0),
        ([1.0], 0, None),
    ],
)
def test_request_figures_exclude_time_to_first_token(stamps, decode, tok_s):
    figs = driver.request_figures(Result(0.0, stamps))
    assert figs["decode_tokens"] == decode
    assert figs["decode_tok_s"] == (pytest.approx(tok_s) if tok_s else None)
    assert figs["ttft_ms"] == pytest.approx(stamps[0] * 1000)


def test_spread_and_percentiles():
    assert driver.spread([3.0, 1.0, 2.0]) == {"median": 2.0, "min": 1.0, "max": 3.0, "n": 3}
    assert driver.pct(list(range(101))) == {"p50": 50.0, "p90": 90.0, "p99": 99.0}
    assert driver.pct([]) is None


def test_prompt_set_is_complete_and_never_answered_short_by_the_twin():
    """The stand-in answers some patterns with one word (exact strings, products,
    counting); a bench prompt must make it decode to max_tokens like a real model."""
    sys.path.insert(0, os.path.join(ROOT, "twin", "engine"))
    try:
        from sparksim import model
    finally:
        sys.path.pop(0)
    with open(os.path.join(FILES, "prompts.json"), encoding="utf-8") as handle:
        prompts = json.load(handle)
    assert sorted(prompts) == ["code", "math", "prose", "reasoning"]
    for ctype, items in prompts.items():
        assert len(items) >= 5, ctype
        assert len(set(items)) == len(items), ctype
        for prompt in items:
            natural_end = model.answer(prompt)[1]
            assert not natural_end, f"{ctype}: the twin answers this short: {prompt}"


def sample_report():
    single = {
        t: {
            "prompts": 3,
            "decode_tok_s": {"median": m, "min": m - 1, "max": m + 1, "n": 3},
            "ttft_ms": {"p50": 20.0, "p90": 25.0, "p99": 30.0},
            "itl_ms": {"p50": 8.3, "p90": 9.0, "p99": 12.0},
            "requests": [],
        }
        for t, m in (("code", 107.0), ("reasoning", 120.0), ("math", 99.0), ("prose", 51.0))
    }
    conc = {
        str(c): {
            "rounds": 2,
            "aggregate_tok_s": {"median": a, "min": a - 5, "max": a + 5, "n": 2},
            "per_request_decode_tok_s": {"median": a / c, "min": 1, "max": 2, "n": 2 * c},
            "ttft_ms": {"p50": 1.0, "p90": 2.0, "p99": 3.0},
            "itl_ms": {"p50": 1.0, "p90": 2.0, "p99": 3.0},
        }
        for c, a in ((4, 307.9), (8, 359.9), (16, 698.4))
    }
    return {
        "figures": {
            "tool": {"name": "llama-benchy", "version": "0.4.0", "driver": "sparkfleet-bench"},
            "started": "2026-01-01T00:00:00Z",
            "duration_s": 12.0,
            "settings": {
                "base_url": "http://127.0.0.1:8888/v1",
                "model": "qwen",
                "types": ["code", "reasoning", "math", "prose"],
                "per_type": 3,
                "max_tokens": 96,
                "temperature": 0.0,
                "concurrency": [4, 8, 16],
                "rounds": 2,
                "seed": 14,
            },
            "failures": [],
            "single_stream": single,
            "single_stream_median_decode_tok_s": 107.6,
            "concurrency": conc,
        },
        "run": {
            "head": "spark-1",
            "nodes": 4,
            "profile": "qwen38_27b_tp4_dflash2",
            "served_model_name": "qwen",
            "image": "img:1",
            "image_id": "sha256:" + "a" * 64,
            "patches": [{"file": "/x/tokenizer_manager.py", "dest_sha256": "b" * 64}],
            "config_hash": "c" * 12,
        },
    }


def test_report_writes_json_table_and_png(tmp_path, monkeypatch, capsys):
    data = sample_report()
    monkeypatch.setattr(sys, "stdin", __import__("io").StringIO(json.dumps(data)))
    assert report.main(["--out-dir", str(tmp_path / "run")]) == 0
    assert json.loads((tmp_path / "run" / "bench.json").read_text()) == data
    table = (tmp_path / "run" / "bench.md").read_text()
    assert "**107.6 tok/s**" in table
    assert "| code | 3 | 107.0 | 106.0-108.0 |" in table
    assert "| C16 | 2 | 698.4 | 693.4-703.4 |" in table
    assert "bbbbbbbbbbbb" in table and "img:1" in table
    png = (tmp_path / "run" / "bench.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    assert not list((tmp_path / "run").glob("*.partial*"))
    assert f"results: {tmp_path / 'run'}" in capsys.readouterr().out


VERBOSE_LOG = """\
TASK [sparkfleet.serving.roce : Apply MTU and address live (only what differs)] ***
<spark-1> ESTABLISH DOCKER CONNECTION FOR USER: root
<spark-1> EXEC ['/usr/bin/docker', b'exec', b'-i', b'spark-1', b'/bin/sh', b'-c', b'python3']
<spark-2> EXEC ['/usr/bin/docker', b'exec', b'-i', b'spark-2', b'/bin/sh', b'-c', b'python3']
<spark-1> PUT /tmp/x TO /tmp/y
<192.168.3.3> SSH: EXEC ssh -C -o ControlMaster=auto 192.168.3.3 '/bin/sh -c python3'
PLAY RECAP *********************************************************************
spark-1      : ok=40   changed=0    unreachable=0    failed=0    skipped=20   rescued=0
spark-2      : ok=38   changed=1    unreachable=0    failed=0    skipped=21   rescued=0
===============================================================================
sparkfleet.serving.roce : Send no-fragment jumbo pings --------------------- 1.25s
sparkfleet.serving.sglang : Resolve the engine profile -------------------- 0.50s
"""


def test_make_bench_counts_tasks_round_trips_and_slowest_tasks():
    counted = make_bench.count_calls(VERBOSE_LOG)
    assert counted["tasks_per_host"] == {"spark-1": 40, "spark-2": 39}
    assert counted["skipped_per_host"] == {"spark-1": 20, "spark-2": 21}
    assert counted["round_trips_per_host"] == {"spark-1": 2, "spark-2": 1}
    assert counted["slowest_tasks"] == [
        {"task": "sparkfleet.serving.roce : Send no-fragment jumbo pings", "s": 1.25},
        {"task": "sparkfleet.serving.sglang : Resolve the engine profile", "s": 0.5},
    ]


def test_make_bench_skips_sections_whose_feature_is_absent(tmp_path, monkeypatch):
    monkeypatch.setattr(make_bench, "ROOT", str(tmp_path))
    called = []
    monkeypatch.setattr(
        make_bench,
        "SECTIONS",
        [make_bench.Section("later", lambda ctx: called.append(1), needs="roles/not_yet")],
    )
    (tmp_path / "README.md").write_text(
        f"# x\n{make_bench.README_START}\nold\n{make_bench.README_END}\nrest\n"
    )
    assert make_bench.main(["--sections", "later", "--out-dir", str(tmp_path / "out")]) == 0
    assert not called
    readme = (tmp_path / "README.md").read_text()
    assert "Skipped: roles/not_yet is not in this checkout." in readme
    assert "old" not in readme and readme.endswith("rest\n")
    assert (tmp_path / "out" / "latest.md").read_text() in readme


def test_itl_comes_from_chunk_arrival_times_not_spread_token_stamps():
    evenly = [1.0, 1.1, 1.2, 1.3]
    arrived = [1.0, 1.05, 1.25, 1.3]
    figs = driver.request_figures(Result(0.9, evenly), arrived)
    assert figs["itl_ms"] == [50.0, 200.0, 50.0]
    assert figs["decode_tok_s"] == pytest.approx(10.0)
