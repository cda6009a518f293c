"""Every shipped preset resolves to exactly the profile (and launch flags) it did when the
profile schema became the single source (issue 13): presets then dropped every line that
only restated a schema default, which must change nothing.

fixtures/resolved_presets.json was captured from the presets before that change; regenerate
it only for a deliberate change of a preset.
"""

from __future__ import annotations

import json
import os

import pytest
from shipped_presets import NAMES, resolve

from ansible_collections.sparkfleet.serving.plugins.module_utils import _engine

HERE = os.path.dirname(__file__)
with open(os.path.join(HERE, "fixtures", "resolved_presets.json"), encoding="utf-8") as handle:
    EXPECTED = json.load(handle)


def test_the_fixture_covers_every_preset():
    assert sorted(EXPECTED) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_preset_resolves_to_the_captured_profile(name):
    assert resolve(name) == EXPECTED[name]["profile"]


@pytest.mark.parametrize("name", NAMES)
def test_preset_renders_the_captured_flags_on_every_rank(name):
    profile = resolve(name)
    for rank, args in EXPECTED[name]["server_args"].items():
        assert _engine.server_args(profile, int(rank), "10.0.30.1") == args, rank
