"""sglang_profile_resolution: every node's profile settings checked and the profile resolved
in one pass (issue 45: the profile was checked by one filter, read again by two include_vars
and resolved again by another)."""

from __future__ import annotations

import os

from ansible_collections.sparkfleet.serving.plugins.filter import engine
from ansible_collections.sparkfleet.serving.plugins.plugin_utils import _profile

ROLE = os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "roles", "sglang")
)
PRESET = "qwen38_27b_tp4_dflash2"


def _resolution(hostvars, profile=PRESET, overrides=None):
    return engine.sglang_profile_resolution(
        list(hostvars), hostvars, ROLE, profile, overrides or {}
    )


def test_good_settings_resolve_to_the_preset_with_its_overrides():
    hostvars = {"spark-1": {}, "spark-2": {}}
    got = _resolution(hostvars, overrides={"max_running_requests": 3})
    assert got["problems"] == []
    preset = engine._load_yaml(os.path.join(ROLE, "files", "presets", f"{PRESET}.yml"))
    want = _profile.expand_data_dir(_profile.resolve(preset, None, {"max_running_requests": 3}))
    assert got["profile"] == want
    assert got["profile"]["max_running_requests"] == 3


def test_checked_once_for_settings_every_host_shares(monkeypatch):
    calls = []
    real = engine.check_settings

    def counting(*args):
        calls.append(args[0])
        return real(*args)

    monkeypatch.setattr(engine, "check_settings", counting)
    _resolution({f"spark-{i}": {} for i in range(1, 9)})
    assert calls == [PRESET]


def test_a_problem_names_the_hosts_and_no_profile_is_returned():
    hostvars = {
        "spark-1": {"sglang_profile_overrides": {"tp_sise": 4}},
        "spark-2": {"sglang_profile_overrides": {"tp_sise": 4}},
        "spark-3": {},
    }
    got = _resolution(hostvars)
    assert got["profile"] is None
    assert len(got["problems"]) == 1
    line = got["problems"][0]
    assert line.startswith("spark-1, spark-2: sglang_profile_overrides.tp_sise is not a profile")
    assert "tp_size" in line and "fix:" in line


def test_a_wrong_type_is_refused_after_resolution():
    got = _resolution({"spark-1": {}}, overrides={"tp_size": "four"})
    assert got["profile"] is None
    assert "does not fit the schema" in got["problems"][0]
    assert got["problems"][0].startswith("spark-1: sglang_profile_overrides")


def test_an_unknown_preset_names_the_closest():
    got = _resolution({"spark-1": {}}, profile="qwen38_27b_tp4_dflash")
    assert got["profile"] is None
    assert "did you mean qwen38_27b_tp4_dflash2?" in got["problems"][0]
    # The deprecated filter returns the same lines.
    assert (
        engine.sglang_profile_problems(
            ["spark-1"], {"spark-1": {}}, ROLE, "qwen38_27b_tp4_dflash", {}
        )
        == got["problems"]
    )


def test_a_ranks_command_is_its_entry_then_its_flags_with_or_without_a_key():
    """sglang_rank_command: the one rule for what a rank runs (its launch configuration and
    the engine's own parse before anything stops both read it)."""
    profile = _resolution({"spark-1": {}, "spark-2": {}})["profile"]
    flags = engine.sglang_server_args(profile, 1, "10.0.30.1")
    assert flags[flags.index("--node-rank") + 1] == "1"
    commands = {}
    for key_set in (False, True):
        entry = engine.sglang_python_command(profile, key_set)
        commands[key_set] = engine.sglang_rank_command(profile, 1, "10.0.30.1", key_set)
        assert commands[key_set] == entry + flags
    # With a key, the entry is the shim that reads it from the environment: another entry.
    assert commands[True] != commands[False]
    assert engine.sglang_rank_command(profile, 1, "10.0.30.1") == commands[False]
