"""Every shipped engine preset resolves and fits the profile schema of the sglang role."""

from __future__ import annotations

import os

import pytest
import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

ROLE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "roles", "sglang")
PRESETS = os.path.join(ROLE, "files", "presets")


def load(path):
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


SPEC = load(os.path.join(ROLE, "meta", "argument_specs.yml"))["argument_specs"]["main"]["options"]
FIELDS = SPEC["sglang_profile_overrides"]["options"]
NAMES = sorted(f[:-4] for f in os.listdir(PRESETS) if f.endswith(".yml"))


def resolve(name):
    data = load(os.path.join(PRESETS, f"{name}.yml"))
    base = data.pop("base", None)
    if base is None:
        return data
    merged = load(os.path.join(PRESETS, f"{base}.yml"))
    assert "base" not in merged, f"{base} may not build on another preset"
    for key, value in data.items():
        merged[key] = {**merged[key], **value} if isinstance(value, dict) else value
    return merged


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
