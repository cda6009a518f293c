"""Every shipped engine preset resolves and fits the profile schema of the sglang role."""

from __future__ import annotations

import os

import pytest
import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from shipped_presets import NAMES, resolve

from ansible_collections.sparkfleet.serving.plugins.plugin_utils import _profile, _register

ROLE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "roles", "sglang")
PRESETS = os.path.join(ROLE, "files", "presets")


def load(path):
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


SPECS = load(os.path.join(ROLE, "meta", "argument_specs.yml"))["argument_specs"]
SPEC = SPECS["main"]["options"]
FIELDS = SPECS["profile"]["options"]


def test_the_documentation_lists_every_preset():
    profile = _register.load()["variables"]["sglang_profile"]
    text = " ".join(profile["description"])
    for name in NAMES:
        assert f"C({name})" in text, name
    assert profile["default"] in NAMES


@pytest.mark.parametrize("name", NAMES)
def test_preset_fits_the_schema(name):
    profile = resolve(name)
    result = ArgumentSpecValidator(FIELDS).validate(profile)
    assert not result.error_messages, result.error_messages
    assert set(profile) == set(FIELDS), set(FIELDS) ^ set(profile)


def test_an_unknown_field_is_rejected():
    result = ArgumentSpecValidator(FIELDS).validate({"tp_sise": 4})
    assert any("tp_sise" in m for m in result.error_messages)


def test_role_defaults_match_the_argument_spec():
    defaults = load(os.path.join(ROLE, "defaults", "main.yml"))
    for key, value in defaults.items():
        assert SPEC[key].get("default") == value, key


def test_overrides_merge_recursively_and_lists_replace():
    profile = resolve(
        "ds4f_flash0731_tp2_c_eagle",
        {"speculative": {"num_steps": 4}, "container": {"devices": []}, "port": 8891},
    )
    assert profile["speculative"] == {
        **resolve("ds4f_flash0731_tp2_c_eagle")["speculative"],
        "num_steps": 4,
    }
    assert profile["container"]["devices"] == []
    assert profile["container"]["shm_size"] == "16g"
    assert profile["port"] == 8891
    # The preset C builds on A and changes only what the seed says.
    assert profile["disable_cuda_graph"] is False
    assert resolve("ds4f_flash0731_tp2_a_graphs_off")["disable_cuda_graph"] is True


@pytest.mark.parametrize(
    ("preset", "base", "message"),
    [
        ({"base": "a"}, None, "builds on a, which was not given"),
        ({}, {"x": 1}, "names no base"),
        ({"base": "a"}, {"base": "b"}, "presets may name one base only"),
    ],
)
def test_bad_preset_chains_are_refused(preset, base, message):
    with pytest.raises(_profile.ProfileError, match=message):
        _profile.resolve(preset, base)


def test_data_dir_moves_every_host_path_with_one_override():
    seed = resolve("qwen38_27b_tp4_dflash2")
    assert seed["model_path"] == "/home/tiger/models/RadixArk/Qwen3.8-27B-NVFP4-BF16-LMHead"
    moved = resolve("qwen38_27b_tp4_dflash2", {"data_dir": "/srv/sparkfleet/"})
    assert moved["model_path"] == "/srv/sparkfleet/models/RadixArk/Qwen3.8-27B-NVFP4-BF16-LMHead"
    assert moved["container"]["volumes"] == [
        "/srv/sparkfleet/.config/qwen38/sglang-cache:/cache",
        "/srv/sparkfleet/.cache/huggingface:/root/.cache/huggingface",
        "/srv/sparkfleet/.config/qwen38:/out",
        "/srv/sparkfleet/models:/srv/sparkfleet/models",
    ]
    for name in NAMES:
        flat = yaml.safe_dump(resolve(name, {"data_dir": "/x"}))
        assert "/home/tiger" not in flat, name
        assert "{data_dir}" not in flat, name


def read_preset(name):
    return load(name if _profile.is_profile_file(name) else os.path.join(PRESETS, f"{name}.yml"))


@pytest.mark.parametrize(
    ("name", "overrides", "variable", "words"),
    [
        ("qwen38_27b_tp4_dflash", {}, "sglang_profile", ["did you mean qwen38_27b_tp4_dflash2?"]),
        ("qwen38_27b_tp4_dflash2", {"tp_sise": 4}, "sglang_profile_overrides.tp_sise", ["tp_size"]),
        (
            "qwen38_27b_tp4_dflash2",
            {"speculative": {"num_draft_tokenz": 4}},
            "sglang_profile_overrides.speculative.num_draft_tokenz",
            ["num_draft_tokens"],
        ),
        ("profiles/mine.yml", {}, "sglang_profile", ["relative path"]),
        (
            "qwen38_27b_tp4_dflash2",
            "port: 1",
            "sglang_profile_overrides",
            ["is a string ('port: 1'), not a mapping", "give a mapping of profile fields"],
        ),
        ("qwen38_27b_tp4_dflash2", ["port", 1], "sglang_profile_overrides", ["is a list"]),
        ("qwen38_27b_tp4_dflash2", 5, "sglang_profile_overrides", ["is a number (5)"]),
        ("/nonexistent/mine.yml", {}, "sglang_profile", ["does not exist"]),
    ],
)
def test_check_settings_names_variable_and_closest_fix(name, overrides, variable, words):
    problems, profile = _profile.check_settings(name, overrides, NAMES, FIELDS, read_preset)
    assert profile is None
    assert len(problems) == 1, problems
    assert problems[0][0] == variable
    for word in words:
        assert word in problems[0][1] + problems[0][2]


def test_a_site_profile_file_builds_on_a_preset(tmp_path):
    site = tmp_path / "mine.yml"
    site.write_text(
        yaml.safe_dump({"base": "qwen38_27b_tp4_dflash2", "data_dir": "/srv/ai", "port": 8090}),
        encoding="utf-8",
    )
    problems, profile = _profile.check_settings(str(site), {}, NAMES, FIELDS, read_preset)
    assert problems == []
    assert profile["port"] == 8090
    assert profile["model_path"].startswith("/srv/ai/models/")
    assert profile["tp_size"] == 4
    site.write_text(yaml.safe_dump({"base": "qwen38_27b_tp4_dflash2", "prot": 1}), encoding="utf-8")
    problems, profile = _profile.check_settings(str(site), {}, NAMES, FIELDS, read_preset)
    assert profile is None
    assert "prot is not a profile field (did you mean port?)" in problems[0][1]
