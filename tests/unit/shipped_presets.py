"""The shipped engine presets, loaded and resolved as the sglang role does (for tests)."""

from __future__ import annotations

import os

import yaml

from ansible_collections.sparkfleet.serving.plugins.plugin_utils import _profile

PRESETS = os.path.join(os.path.dirname(__file__), "..", "..", "roles", "sglang", "files", "presets")
NAMES = sorted(f[:-4] for f in os.listdir(PRESETS) if f.endswith(".yml"))


def load(name):
    """The preset file ``name`` as written."""
    with open(os.path.join(PRESETS, f"{name}.yml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def resolve(name, overrides=None):
    """The profile ``name`` resolves to (its base, the preset, then ``overrides``)."""
    data = load(name)
    base = load(data["base"]) if "base" in data else None
    return _profile.expand_data_dir(_profile.resolve(data, base, overrides, name))
