"""Every shipped engine preset resolves and fits the profile schema of the sglang role."""

from __future__ import annotations

import os

import pytest
import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.sparkfleet.serving.plugins.module_utils import _profile

ROLE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "roles", "sglang")
PRESETS = os.path.join(ROLE, "files", "presets")


def load(path):
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


SPEC = load(os.path.join(ROLE, "meta", "argument_specs.yml"))["argument_specs"]["main"]["options"]
FIELDS = SPEC["sglang_profile_overrides"]["options"]
NAMES = sorted(f[:-4] for f in os.listdir(PRESETS) if f.endswith(".yml"))


def resolve(name, overrides=None):
    data = load(os.path.join(PRESETS, f"{name}.yml"))
    base = load(os.path.join(PRESETS, f"{data['base']}.yml")) if "base" in data else None
    return _profile.resolve(data, base, overrides, name)


def test_the_choices_list_every_preset():
    assert sorted(SPEC["sglang_profile"]["choices"]) == NAMES
    assert SPEC["sglang_profile"]["default"] in NAMES


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
