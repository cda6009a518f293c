"""_upgrade: an engine upgrade's verdict, its known-good record and its result table."""

from __future__ import annotations

import pytest

from ansible_collections.sparkfleet.serving.plugins.module_utils import _canary
from ansible_collections.sparkfleet.serving.plugins.plugin_utils import _upgrade


def check(passed=True):
    return {"passed": passed, "status": 200, "detail": "ok" if passed else "wrong", "excerpt": ""}


def probe(rate=40.0, boot=True, exact=True, math=True, stable=5, died=None):
    if not boot:
        return {"boot": {"ok": False, "seconds": 30.0, "detail": "no HTTP 200 from /health"}}
    return {
        "boot": {"ok": True, "seconds": 12.0, "detail": "ok"},
        "exact": check(exact),
        "math": check(math),
        "short": check(),
        "decode_runs": [{"passed": True, "tokens_per_s": r} for r in (rate, rate, rate) if r],
        "stability": [check(i < stable) for i in range(5)],
        "completions": 11,
        "died": died,
    }


def row(**kwargs):
    return _canary.candidate_row("x", "", probe(**kwargs))


KNOWN_GOOD = row(rate=40.0)


def test_a_new_image_as_fast_stable_and_exact_is_kept():
    got = _upgrade.verdict(KNOWN_GOOD, row(rate=41.0), 0.05)
    assert got["decision"] == "kept" and got["reasons"] == []
    assert got["line"] == (
        "Decision: kept the new image: 41.0 vs 40.0 tok/s single-stream (+2.5%), stable, "
        "exact/math OK."
    )


@pytest.mark.parametrize(
    ("rate", "decision"),
    [(38.0, "kept"), (38.01, "kept"), (37.99, "rolled back"), (20.0, "rolled back")],
)
def test_slower_by_more_than_the_bound_is_rolled_back(rate, decision):
    got = _upgrade.verdict(KNOWN_GOOD, row(rate=rate), 0.05)
    assert got["decision"] == decision
    if decision == "rolled back":
        assert (
            "more than upgrade_max_slowdown=0.05 below the known-good (at least 38.0" in got["line"]
        )


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"boot": False}, "did not boot: FAIL: no HTTP 200 from /health"),
        ({"exact": False}, "failed exact (FAIL (exact))"),
        ({"exact": False, "math": False}, "failed exact and math"),
        ({"stable": 3}, "not stable: FAIL (3/5 sequential passed)"),
        (
            {"died": {"after_completions": 7, "request": "stability request 2", "reason": "x"}},
            "died: DIED after 7 completions (in stability request 2)",
        ),
        ({"rate": None}, "no decode rate measured"),
    ],
)
def test_anything_but_a_healthy_stable_exact_engine_is_rolled_back(kwargs, reason):
    got = _upgrade.verdict(KNOWN_GOOD, row(**kwargs), 0.05)
    assert got["decision"] == "rolled back"
    assert any(r.startswith(reason) for r in got["reasons"]), got["reasons"]
    # A failed probe is the reason, not a rate compared against the known-good.
    assert not any(r.startswith("slower") for r in got["reasons"])


def test_an_unmeasured_known_good_does_not_compare_rates_and_says_so():
    unmeasured = dict(KNOWN_GOOD, c1_tokens_per_s=None)
    got = _upgrade.verdict(unmeasured, row(rate=10.0), 0.05)
    assert got["decision"] == "kept"
    assert "the known-good was not measured" in got["line"]


@pytest.mark.parametrize("bound", [-0.1, 1, 1.5, "x"])
def test_a_bound_that_is_not_a_fraction_is_an_error(bound):
    with pytest.raises(ValueError):
        _upgrade.verdict(KNOWN_GOOD, row(), bound)


RECORD = {
    "version": 1,
    "cluster": "rack7",
    "recorded_at": "2026-12-06T03:00:00Z",
    "run_id": "20261206T030000Z",
    "image": "lmsysorg/sglang:v0.5.9",
    "image_id": "sha256:" + "a" * 64,
    "profile": {"image": "lmsysorg/sglang:v0.5.9"},
    "ranks": {"spark-1": {"config_hash": "0123456789abcdef", "patches": ["b" * 64]}},
}


def test_a_complete_record_can_be_returned_to():
    assert _upgrade.record_problems(RECORD) == []


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"image_id": None}, "the known-good record: image_id is NoneType, not str"),
        ({"image_id": "lmsysorg/sglang:v0.5.9"}, "is not a sha256 image id"),
        ({"version": 2}, "is version 2, this collection reads 1"),
        ({"ranks": {"spark-1": {"config_hash": "x"}}}, "rank spark-1 has no patches"),
        ({"ranks": {"spark-1": "x"}}, "rank spark-1 is not an object"),
    ],
)
def test_an_incomplete_record_names_what_it_lacks(change, problem):
    problems = _upgrade.record_problems(dict(RECORD, **change))
    assert any(problem in p for p in problems), problems


def test_a_record_without_a_field_or_not_an_object():
    partial = {k: v for k, v in RECORD.items() if k != "profile"}
    assert _upgrade.record_problems(partial) == ["the known-good record has no profile"]
    assert _upgrade.record_problems([]) == ["the known-good record is not a JSON object"]


def test_the_result_shows_both_sets_of_figures_and_the_decision():
    candidate = row(rate=30.0)
    result = _upgrade.verdict(KNOWN_GOOD, candidate, 0.05)
    md = _upgrade.markdown(
        {
            "run_id": "R1",
            "cluster": "rack7",
            "from_image": "sglang:0.5.9",
            "from_image_id": "sha256:a",
            "to_image": "sglang:0.5.12",
            "to_image_id": "sha256:b",
            "max_slowdown": 0.05,
        },
        KNOWN_GOOD,
        candidate,
        result,
    )
    assert md.startswith("# Engine upgrade R1 on rack7\n")
    assert (
        "| known-good | OK (12.0 s) | OK | 40.0 tok/s (median of 3 runs) | OK (5/5 sequential) |"
        in md
    )
    assert "| new | OK (12.0 s) | OK | 30.0 tok/s (median of 3 runs) | OK (5/5 sequential) |" in md
    assert "- max slowdown: 5%" in md
    assert result["line"] in md and result["decision"] == "rolled back"


def test_the_result_of_a_try_that_stopped_names_the_error_and_shows_the_known_good_only():
    line = "Decision: refused before anything stopped: x."
    result = {"decision": "refused", "reasons": ["x"], "line": line}
    run = {"run_id": "R2", "cluster": "rack7", "max_slowdown": 0.05}
    md = _upgrade.markdown(run, KNOWN_GOOD, {}, result, "Apply the patches failed: anchor moved\n")
    assert "| known-good |" in md and "| new |" not in md
    assert md.endswith("The try stopped: Apply the patches failed: anchor moved\n")
    assert "The try stopped" not in _upgrade.markdown(run, KNOWN_GOOD, {}, result)


OLD = "sha256:" + "0" * 64
NEW = "sha256:" + "1" * 64
BOTH = {"spark-1": {"exists": True, "id": NEW}, "spark-2": {"exists": True, "id": NEW}}
QUIET = {"paused": None, "gave_up": None, "reboot_required": None, "held": None, "drill": None}


def problems(**kwargs):
    args = {
        "image": "sglang:0.5.12",
        "images": BOTH,
        "running_id": OLD,
        "status": QUIET,
        "healthy": True,
        "max_slowdown": 0.05,
    }
    args.update(kwargs)
    return _upgrade.problems(**args)


def test_a_healthy_cluster_and_the_same_new_image_everywhere_may_upgrade():
    assert problems() == []


def test_no_image_is_named():
    assert problems(image="", images={}) == [
        "upgrade_image is not set: name the engine image to try, -e upgrade_image=<tag or id>"
    ]


def test_a_node_without_the_image_is_named_unless_an_archive_brings_it():
    images = dict(BOTH, **{"spark-2": {"exists": False}})
    assert problems(images=images) == [
        "spark-2: the image sglang:0.5.12 is not present (docker image inspect); pull it on every "
        "node, or give -e upgrade_image_archive=<a docker save tarball on the head>"
    ]
    assert problems(images=images, archive="/srv/sglang-0.5.12.tar") == []


def test_a_node_where_docker_could_not_say_is_named_with_its_error():
    images = {**BOTH, "spark-2": {"exists": None, "error": "docker image inspect: daemon down"}}
    out = problems(images=images, archive="/srv/new.tar")
    assert out == [
        "spark-2: docker could not say whether sglang:0.5.12 is there "
        "(docker image inspect: daemon down): fix docker on that node and run again"
    ]


def test_different_ids_on_the_nodes_are_named():
    images = dict(BOTH, **{"spark-2": {"exists": True, "id": OLD}})
    got = problems(images=images)
    assert got == [
        "the image sglang:0.5.12 is not the same on every node (spark-1 sha256:111111111111, "
        "spark-2 sha256:000000000000): pull the same tag everywhere, or name the image by its id"
    ]


def test_the_image_already_running_is_not_an_upgrade():
    assert problems(running_id=NEW) == [
        "the cluster already runs sglang:0.5.12 (sha256:111111111111): nothing to upgrade"
    ]


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("paused", "paused (canary R1)", "the watchdog is paused (paused (canary R1))"),
        ("gave_up", "2026-12-06 GAVE UP", "the watchdog gave up"),
        ("reboot_required", {"reason": "spark-2 short"}, "a node needs a reboot (spark-2 short)"),
        ("held", {"reason": "site.yml"}, "held by a run changing the cluster (site.yml)"),
        ("drill", "R2/head_kill", "a fault drill is marked as running (R2/head_kill)"),
    ],
)
def test_a_watchdog_that_does_not_act_refuses(key, value, says):
    got = problems(status=dict(QUIET, **{key: value}))
    assert len(got) == 1 and says in got[0], got


def test_every_reason_at_once():
    got = problems(
        image="sglang:0.5.12",
        images={"spark-1": {"exists": False}},
        status=None,
        healthy=False,
        max_slowdown=1.5,
    )
    assert [p.split(" ")[0] for p in got] == ["upgrade_max_slowdown=1.5", "spark-1:", "the", "the"]
    assert "cannot be read on the head" in got[2] and "not healthy" in got[3]
