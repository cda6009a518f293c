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
    (tmp_path / "docs").mkdir()
    (tmp_path / make_bench.DOCS_PAGE).write_text(
        f"# x\n{make_bench.DOCS_START}\nold\n{make_bench.DOCS_END}\nrest\n"
    )
    assert make_bench.main(["--sections", "later", "--out-dir", str(tmp_path / "out")]) == 0
    assert not called
    readme = (tmp_path / make_bench.DOCS_PAGE).read_text()
    assert "Skipped: roles/not_yet is not in this checkout." in readme
    assert "old" not in readme and readme.endswith("rest\n")
    assert (tmp_path / "out" / "latest.md").read_text() in readme


def test_itl_comes_from_chunk_arrival_times_not_spread_token_stamps():
    evenly = [1.0, 1.1, 1.2, 1.3]
    arrived = [1.0, 1.05, 1.25, 1.3]
    figs = driver.request_figures(Result(0.9, evenly), arrived)
    assert figs["itl_ms"] == [50.0, 200.0, 50.0]
    assert figs["decode_tok_s"] == pytest.approx(10.0)


# ---- make bench, weights section ---------------------------------------------------

MANIFESTS = [
    {
        "repo": "RadixArk/Qwen3.8-27B-NVFP4-BF16-LMHead",
        "commit": "831e",
        "files": [{"path": "config.json", "size": 300}, {"path": "model.safetensors", "size": 700}],
    },
    {
        "repo": "z-lab/DFlash2",
        "commit": "4ac2",
        "files": [{"path": "model.safetensors", "size": 1000}],
    },
]


@pytest.mark.parametrize(
    ("files", "ratio", "gets", "extra"),
    [
        # Every file once for the whole cluster: 1.0.
        (
            {
                "RadixArk/Qwen3.8-27B-NVFP4-BF16-LMHead/config.json": {"bytes": 300, "gets": 1},
                "RadixArk/Qwen3.8-27B-NVFP4-BF16-LMHead/model.safetensors": {
                    "bytes": 700,
                    "gets": 1,
                },
                "z-lab/DFlash2/model.safetensors": {"bytes": 1000, "gets": 1},
            },
            1.0,
            1,
            [],
        ),
        # The draft fetched by two nodes, one file outside the staged revisions: counted too.
        (
            {
                "RadixArk/Qwen3.8-27B-NVFP4-BF16-LMHead/config.json": {"bytes": 300, "gets": 1},
                "RadixArk/Qwen3.8-27B-NVFP4-BF16-LMHead/model.safetensors": {
                    "bytes": 700,
                    "gets": 1,
                },
                "z-lab/DFlash2/model.safetensors": {"bytes": 2000, "gets": 2},
                "z-lab/DFlash2/README.md": {"bytes": 500, "gets": 1},
            },
            1.75,
            2,
            ["z-lab/DFlash2/README.md"],
        ),
        ({}, 0.0, 0, []),
    ],
)
def test_weights_ratio_is_mirror_bytes_over_staged_model_bytes(files, ratio, gets, extra):
    figs = make_bench.weights_ratio({"files": files, "served": 1}, MANIFESTS)
    assert figs["model_bytes"] == 2000
    assert figs["ratio"] == ratio
    assert figs["files"] == 3
    assert figs["max_gets_per_file"] == gets
    assert figs["served_not_in_model"] == extra


def test_weights_ratio_without_a_staged_revision_is_none():
    assert make_bench.weights_ratio({"files": {}}, [])["ratio"] is None


def test_throughput_is_bytes_times_copies_over_wall_time():
    assert make_bench.throughput(64_000_000, 3, 2.0) == 96.0
    assert make_bench.throughput(64_000_000, 1, 4.0) == 16.0
    assert make_bench.throughput(1, 1, 0) is None
    assert make_bench.throughput(1, 1, None) is None


def test_bench_fans_out_with_the_roles_own_rsync_command():
    """The bench times the rsync the role runs: same options, key, known_hosts."""
    import yaml

    with open(os.path.join(ROOT, "roles", "model_weights", "tasks", "fanout.yml")) as handle:
        tasks = yaml.safe_load(handle)
    (task,) = [t for t in tasks if t.get("name", "").startswith("Send each peer")]
    role = [" ".join(str(a).split()) for a in task["ansible.builtin.command"]["argv"]]
    ssh_dir = "{{ model_weights_ssh_dir }}"
    bench = make_bench.role_rsync_argv(ssh_dir, "SRC", "USER", "PEER", "DEST")
    assert bench[:-2] == role[:-2]
    assert role[-2].endswith("/") and bench[-2] == "SRC/"
    assert bench[-1] == "USER@PEER:DEST/"


def test_plain_copy_is_one_tar_over_ssh_stream_per_copy():
    argv = make_bench.plain_copy_argv(
        "/k", "/kh", "root", "10.0.30.2", [("/a", "/x"), ("/b", "/y")]
    )
    assert argv[:2] == ["sh", "-c"]
    assert argv[2].count("| ssh -i /k ") == 2
    assert "root@10.0.30.2 'mkdir -p /x && tar -C /x -xf -'" in argv[2]
    assert "UserKnownHostsFile=/kh" in argv[2] and "StrictHostKeyChecking=yes" in argv[2]


def test_weights_twin_of_two_nodes_is_cut_from_the_eight_node_inventory(tmp_path, monkeypatch):
    import shutil

    for name in ("sim", "sim-2node", "sim-8node"):
        shutil.copytree(os.path.join(ROOT, "inventory", name), tmp_path / "inventory" / name)
    monkeypatch.setattr(make_bench, "ROOT", str(tmp_path))
    inv = make_bench.weights_inventory(2)
    assert inv.startswith(str(tmp_path / ".cache"))
    assert inv.endswith("sim-weights-2")
    info_hosts = make_bench.read(os.path.join(inv, "hosts.yml"))
    assert "spark-2:" in info_hosts and "spark-3:" not in info_hosts
    twin = make_bench.read(os.path.join(inv, "group_vars", "spark_nodes", "twin.yml"))
    assert "\n  tp_size: 2\n" in twin and "\n  nnodes: 2\n" in twin
    assert "sparksim_mirror_ipv4:" in twin
    assert sorted(os.listdir(os.path.join(inv, "host_vars"))) == ["spark-1.yml", "spark-2.yml"]
    # Sizes whose inventory has the mirror are used as they are.
    assert make_bench.weights_inventory(4) == "inventory/sim"
    with pytest.raises(ValueError, match="tp_size"):
        make_bench.resize_profile("x: 1\n", 2)


def test_weights_table_reports_ratio_no_change_bytes_and_throughputs():
    sizes = {
        "4": {
            "runs": [
                {
                    "model_bytes": 2000,
                    "served_bytes": 2000,
                    "ratio": 1.0,
                    "nochange_served_bytes": 0,
                }
            ],
            "fanout": {
                "model": {"fanout_wall_s": 0.9, "plain_wall_s": 0.4},
                "bulk": {"fanout_mb_s": 90.5, "fanout_per_peer_mb_s": 30.2, "plain_mb_s": 60.0},
            },
        },
        "8": {"runs": []},
    }
    lines = make_bench.weights_table(sizes, 64, 1)
    assert lines[2] == "| 4 | 2000 | 2000 | 1.000 | 0 | 0.9 | 0.4 | 90.5 (30.2) | 60 |"
    assert lines[3] == "| 8 | n/a | n/a | n/a | n/a | n/a | n/a | n/a (n/a) | n/a |"
    assert all(line.count("|") == lines[0].count("|") for line in lines[1:4])


def test_provisioning_table_has_a_header_for_every_column():
    sizes = {
        "4": {
            "cold_s": make_bench.spread([100.0]),
            "nochange_s": make_bench.spread([50.0]),
            "nochange_controller_cpu_s": make_bench.spread([40.0]),
            "nochange_changed": [0],
            "load_avg_1m": [3.5],
        }
    }
    lines = make_bench.provisioning_table(sizes, None, 1)
    assert lines[0].count("|") == lines[1].count("|") == lines[2].count("|")
    assert "| 40.0 (40.0-40.0) | 0 |" in lines[2] and lines[2].endswith("| 3.5 |")


def test_report_states_runs_and_machine_load():
    text = make_bench.markdown(
        {
            "started": "S",
            "duration_s": 10,
            "host": "h, 2 cores",
            "runs": 1,
            "load_avg": {"start": [4.0, 3.0, 2.0], "end": [5.5, 4.0, 3.0]},
            "sections": {},
        }
    )
    assert "1 run(s) per figure" in text
    assert "4.00 / 3.00 / 2.00" in text and "5.50 / 4.00 / 3.00" in text


def test_private_docker_daemon_gets_its_own_twin_lock(monkeypatch):
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    assert make_bench.default_lock() == "/tmp/sparkfleet-twin.lock"
    monkeypatch.setenv("DOCKER_HOST", "unix:///var/run/docker-bn.sock")
    assert make_bench.default_lock() == "/tmp/sparkfleet-twin-unix-var-run-docker-bn-sock.lock"


def test_revisions_for_one_peer_go_one_after_another():
    one = make_bench.one_after_another([["rsync", "a b", "x"]])
    assert one == ["rsync", "a b", "x"]
    two = make_bench.one_after_another([["rsync", "a b", "x"], ["rsync", "c", "y"]])
    assert two == ["sh", "-c", "rsync 'a b' x && rsync c y"]


def test_resume_keeps_the_sizes_an_interrupted_run_measured(tmp_path):
    partial = tmp_path / "20261202T214700Z.partial.json"
    partial.write_text(json.dumps({"provisioning": {"partial": True, "sizes": {"2": {"x": 1}}}}))
    kept = make_bench.resumed_sizes(str(partial))
    assert kept == {"2": {"x": 1, "from_run": "20261202T214700Z"}}
    assert make_bench.resumed_sizes("") == {}
    assert make_bench.resumed_sizes(str(partial), "weights") == {}
    sizes = {
        "2": {
            "cold_s": None,
            "nochange_s": None,
            "nochange_controller_cpu_s": None,
            "nochange_changed": [],
            "load_avg_1m": [],
            "from_run": "20261202T214700Z",
        }
    }
    text = "\n".join(make_bench.provisioning_table(sizes, None, 1))
    assert "2 nodes in run 20261202T214700Z" in text


PROFILED_LOG = """\
PLAY [Check] *******************************************************************
TASK [sparkfleet.serving.sglang : Resolve the engine profile] ******************
Wednesday 02 December 2026  21:58:56 +0000 (0:00:00.050)       0:00:00.050 ****
TASK [sparkfleet.serving.roce : Send pings] ************************************
Wednesday 02 December 2026  21:59:02 +0000 (0:00:06.500)       0:00:06.550 ****
<spark-1> EXEC ['/usr/bin/docker', b'exec', b'-i', b'spark-1', b'/bin/sh', b'-c', b'python3']
<spark-2> EXEC ['/usr/bin/docker', b'exec', b'-i', b'spark-2', b'/bin/sh', b'-c', b'python3']
TASK [Report] ******************************************************************
Wednesday 02 December 2026  21:59:04 +0000 (0:00:02.250)       0:00:08.800 ****
RUNNING HANDLER [sparkfleet.serving.roce : Reload] *****************************
Wednesday 02 December 2026  21:59:05 +0000 (0:00:01.000)       0:00:09.800 ****
<spark-1> PUT /tmp/x TO /tmp/y

PLAY RECAP *********************************************************************
spark-1                    : ok=4    changed=0    unreachable=0    failed=0    skipped=0
Wednesday 02 December 2026  21:59:06 +0000 (0:00:01.500)       0:00:11.300 ****
"""


def test_time_by_role_attributes_each_profile_stamp_to_the_task_before_it():
    roles = make_bench.time_by_role(PROFILED_LOG)
    assert roles == {
        "sparkfleet.serving.sglang": {"s": 6.5, "tasks": 1, "round_trips": 0},
        "sparkfleet.serving.roce": {"s": 3.75, "tasks": 2, "round_trips": 3},
        "(play tasks)": {"s": 1.0, "tasks": 1, "round_trips": 0},
    }
    assert next(iter(roles)) == "sparkfleet.serving.sglang"  # slowest first
