"""The profile schema (the sglang role's ``profile`` entry point) and the flag table agree.

A field the launch renders must be a documented, checked profile field, or an override of
it would be refused as unknown while a preset silently sets it.
"""

from __future__ import annotations

import os

import pytest
import yaml

from ansible_collections.sparkfleet.serving.plugins.module_utils import _engine

SPECS = os.path.join(
    os.path.dirname(__file__), "..", "..", "..", "roles", "sglang", "meta", "argument_specs.yml"
)
with open(SPECS, encoding="utf-8") as handle:
    SCHEMA = yaml.safe_load(handle)["argument_specs"]["profile"]["options"]

RENDERED = [field for field, _flag in _engine._SERVER_FLAGS if not field.startswith("__")]


def lookup(dotted):
    spec = {"options": SCHEMA}
    for part in dotted.split("."):
        spec = (spec.get("options") or {}).get(part)
        if spec is None:
            return None
    return spec


@pytest.mark.parametrize("field", RENDERED)
def test_every_rendered_field_is_in_the_schema(field):
    spec = lookup(field)
    assert spec is not None, f"{field} is rendered as a flag but not a profile field"
    assert spec.get("description") and spec.get("type")


def test_every_schema_field_is_documented_and_typed():
    def walk(options, prefix=""):
        for name, spec in options.items():
            assert spec.get("description"), f"{prefix}{name}"
            assert spec.get("type"), f"{prefix}{name}"
            walk(spec.get("options") or {}, f"{prefix}{name}.")

    walk(SCHEMA)
