"""Seed Pitfalls 3, 5 and 6 through the REAL upstream tokenizer_manager.py / watchdog.py.

Seven 2-node DFlash2 clusters (8 draft tokens, --watchdog-timeout 2) run side by
side; each gets one ``max_tokens=8`` request. What happens next depends only on
which files are bind-mounted, which .pyc mode the image has and whether the launch
passes ``--check-hash-based-pycs always``.
"""

from __future__ import annotations

import concurrent.futures
import json
import time

import pytest
from twin_helpers import (
    DUMP_LOG,
    IMAGE,
    IMAGE_UNCHECKED,
    TM_PATH,
    WD_PATH,
    WD_PYC,
    Cluster,
    chat,
    docker,
    wait_for,
)

FLAGS = [
    "--speculative-algorithm", "DFLASH",
    "--speculative-draft-model-path", "z-lab/Qwen3.8-27B-DFlash2",
    "--speculative-num-draft-tokens", "8",
    "--watchdog-timeout", "2",
]  # fmt: skip

# name: (image, check_hash, mounts by key of the patched_files fixture)
SCENARIOS = {
    "plain": (IMAGE, True, []),
    "clamp": (IMAGE, True, [("tm_clamp", TM_PATH), ("wd_dump", WD_PATH)]),
    "uncheckednoflag": (IMAGE_UNCHECKED, False, [("tm_clamp", TM_PATH), ("wd_dump", WD_PATH)]),
    "uncheckedflag": (IMAGE_UNCHECKED, True, [("tm_clamp", TM_PATH)]),
    "dump": (IMAGE, True, [("wd_dump", WD_PATH)]),
    "uncheckeddump": (IMAGE_UNCHECKED, True, [("wd_dump", WD_PATH)]),
    "uncheckeddumpnopyc": (IMAGE_UNCHECKED, True, [("wd_dump", WD_PATH), ("empty", WD_PYC)]),
}
CRASHES = {"plain", "uncheckednoflag", "dump", "uncheckeddump", "uncheckeddumpnopyc"}


def _grep(node, path):
    proc = docker("exec", node, "grep", "-c", "HARDEN-PATCH", path, check=False)
    return int(proc.stdout.strip() or 0)


@pytest.fixture(scope="module")
def outcomes(planes, tmp_path_factory, model_dir, patched_files):
    clusters = {}
    try:
        for name, (image, check_hash, mounts) in SCENARIOS.items():
            clusters[name] = Cluster(
                planes,
                tmp_path_factory.mktemp(name),
                name,
                image=image,
                check_hash=check_hash,
                flags=FLAGS,
                mounts=[(patched_files[key], target) for key, target in mounts],
                model_dir=model_dir,
            )
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda c: c.start(), clusters.values()))
            list(pool.map(lambda c: c.wait_ready(timeout=60), clusters.values()))
        result = {
            name: {
                "grep_tm": _grep(c.node(0), TM_PATH),
                "grep_wd": _grep(c.node(0), WD_PATH),
            }
            for name, c in clusters.items()
        }
        with concurrent.futures.ThreadPoolExecutor(len(clusters)) as pool:
            replies = {
                name: pool.submit(chat, c.url(0), "What is 17*19?", 8, None, False, 40)
                for name, c in clusters.items()
            }
            for name, future in replies.items():
                result[name]["reply"] = future.result()
        deadline = time.monotonic() + 30  # one budget for all: a failing run stays short
        for name, cluster in clusters.items():
            if name in CRASHES:
                for rank in range(cluster.nnodes):
                    cluster.wait_exit(rank, max(0.0, deadline - time.monotonic()))
            result[name]["state"] = {r: cluster.state(r) for r in range(cluster.nnodes)}
            result[name]["logs"] = {r: cluster.logs(r) for r in range(cluster.nnodes)}
            result[name]["healthy"] = cluster.state(0)[0] and cluster.healthy(0)
        yield result
    finally:
        for cluster in clusters.values():
            cluster.remove()


def _died(outcome):
    return all(not running and code not in (None, 0) for running, code in outcome["state"].values())


def test_without_clamp_short_request_kills_every_rank(outcomes):
    plain = outcomes["plain"]
    assert plain["reply"][0] == 0, plain["reply"]
    assert _died(plain), plain["state"]
    for rank, text in plain["logs"].items():
        assert "Scheduler watchdog timeout (self.watchdog_timeout=2.0, self.soft=False)" in text
        assert "py-spy dump failed: Error: Failed to copy Py_Version" in text
        assert DUMP_LOG not in text, f"rank {rank}: no stack dump without the watchdog patch"
    assert "SIGQUIT received. signum=None, frame=None." in plain["logs"][0]
    assert "Received sigquit from a child process." in plain["logs"][1]


def test_mounted_clamp_returns_text(outcomes):
    clamp = outcomes["clamp"]
    status, body = clamp["reply"]
    assert status == 200, body
    assert json.loads(body)["choices"][0]["message"]["content"] == "323"
    assert clamp["healthy"]
    assert all(running for running, _ in clamp["state"].values())
    assert clamp["grep_tm"] >= 1 and clamp["grep_wd"] >= 1


def test_unchecked_pycs_shadow_the_mounted_patch(outcomes):
    """Pitfall 6: grep finds the patch, but the stale pyc is what runs."""
    stale = outcomes["uncheckednoflag"]
    assert stale["grep_tm"] >= 1 and stale["grep_wd"] >= 1
    assert stale["reply"][0] == 0
    assert _died(stale)
    assert not any(DUMP_LOG in text for text in stale["logs"].values())


def test_check_hash_flag_makes_the_mounted_patch_run(outcomes):
    fixed = outcomes["uncheckedflag"]
    status, body = fixed["reply"]
    assert status == 200, body
    assert json.loads(body)["choices"][0]["message"]["content"] == "323"
    assert fixed["healthy"]


def test_stack_dump_only_with_patched_watchdog(outcomes):
    dump = outcomes["dump"]
    assert _died(dump)
    for text in dump["logs"].values():
        assert DUMP_LOG in text
        assert "in verify" in text, "the dump shows where the scheduler is stuck"
        assert text.index(DUMP_LOG) < text.index("py-spy dump failed")


def test_check_hash_flag_does_not_reach_the_spawned_scheduler(outcomes):
    """The scheduler is a multiprocessing spawn child: it does not inherit
    --check-hash-based-pycs, so with unchecked-hash pycs the watchdog patch stays
    shadowed even with the flag, unless the stale pyc is hidden too."""
    assert _died(outcomes["uncheckeddump"])
    assert not any(DUMP_LOG in t for t in outcomes["uncheckeddump"]["logs"].values())
    assert _died(outcomes["uncheckeddumpnopyc"])
    assert all(DUMP_LOG in t for t in outcomes["uncheckeddumpnopyc"]["logs"].values())


def test_clusters_are_gone_after_crash(outcomes):
    for name in CRASHES:
        assert wait_for(lambda n=name: _died(outcomes[n]), 1), name
