"""Profile resolution: a preset, its base, then the overrides."""

from __future__ import annotations

import copy
from collections.abc import Mapping

import pytest

from ansible_collections.sparkfleet.serving.plugins.plugin_utils import _profile


class LazyMapping(Mapping):
    """Stands for Ansible's lazy containers: a deep copy would template every value again."""

    def __init__(self, data):
        self._data = data

    def __getitem__(self, key):
        return self._data[key]

    def __iter__(self):
        return iter(self._data)

    def __len__(self):
        return len(self._data)

    def __deepcopy__(self, memo):
        raise AssertionError("a filter input was deep-copied")


def test_resolve_reads_its_inputs_once_and_returns_plain_data():
    base = {"container": {"memory": "2g", "volumes": ["/a:/a"]}, "tp_size": 4}
    preset = LazyMapping({"base": "x", "tp_size": 2, "env": LazyMapping({"A": "1"})})
    overrides = LazyMapping(
        {"container": LazyMapping({"memory": "4g"}), "patches": [{"file": "f"}]}
    )
    profile = _profile.resolve(preset, base, overrides, "p")
    assert profile["tp_size"] == 2
    assert profile["container"]["memory"] == "4g"
    assert profile["container"]["volumes"] == ["/a:/a"]
    assert profile["env"] == {"A": "1"}
    assert not isinstance(profile["env"], LazyMapping) and isinstance(profile["env"], dict)
    assert not isinstance(profile["container"], LazyMapping)
    # The result shares nothing with the inputs: changing it changes no input.
    profile["container"]["volumes"].append("/b:/b")
    profile["patches"][0]["file"] = "g"
    assert base["container"]["volumes"] == ["/a:/a"]
    assert overrides["patches"][0]["file"] == "f"
    copy.deepcopy(profile)  # plain data


def test_a_base_that_names_a_base_is_refused():
    with pytest.raises(_profile.ProfileError, match="presets may name one base only"):
        _profile.resolve({"base": "b"}, {"base": "c"}, None, "p")
