"""The profile schema (plugins/module_utils/_profile_schema.py) is the one source of the
engine profile's fields (issue 13): the sglang role's ``profile`` entry point, the launch
flags, the owned flags and the defaults presets build on all come from it.

A field the launch renders must be a documented, checked profile field, or an override of
it would be refused as unknown while a preset silently sets it.
"""

from __future__ import annotations

import importlib.util
import os

import pytest
import yaml

from ansible_collections.sparkfleet.serving.plugins.module_utils import _engine, _profile_schema
from ansible_collections.sparkfleet.serving.plugins.plugin_utils import (
    _inventory,
    _inventory_vars,
    _profile,
)

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..")
SPECS = os.path.join(ROOT, "roles", "sglang", "meta", "argument_specs.yml")
with open(SPECS, encoding="utf-8") as handle:
    SPEC_TEXT = handle.read()
SCHEMA = yaml.safe_load(SPEC_TEXT)["argument_specs"]["profile"]["options"]

_tool = importlib.util.spec_from_file_location(
    "profile_spec", os.path.join(ROOT, "tools", "profile_spec.py")
)
profile_spec = importlib.util.module_from_spec(_tool)
_tool.loader.exec_module(profile_spec)

RENDERED = [field for field, _flag in _engine.server_flags() if not field.startswith("__")]

# What the flag table and the owned flags were when the schema took them over (issue 13):
# new flags may come anywhere, these keep their order and owners.
SEED_FLAG_ORDER = [
    "--trust-remote-code",
    "--model-path",
    "--tp-size",
    "--pp-size",
    "--nnodes",
    "--node-rank",
    "--dist-init-addr",
    "--served-model-name",
    "--context-length",
    "--mem-fraction-static",
    "--attention-backend",
    "--chunked-prefill-size",
    "--kv-cache-dtype",
    "--disable-cuda-graph",
    "--disable-prefill-cuda-graph",
    "--cuda-graph-max-bs",
    "--disable-flashinfer-autotune",
    "--speculative-algorithm",
    "--speculative-draft-model-path",
    "--speculative-draft-model-revision",
    "--speculative-eagle-topk",
    "--speculative-num-steps",
    "--speculative-num-draft-tokens",
    "--speculative-dspark-block-size",
    "--speculative-draft-model-quantization",
    "--mamba-radix-cache-strategy",
    "--mamba-ssm-dtype",
    "--max-mamba-cache-size",
    "--max-running-requests",
    "--enable-torch-compile",
    "--torch-compile-max-bs",
    "--num-continuous-decode-steps",
    "--watchdog-timeout",
    "--reasoning-parser",
    "--tool-call-parser",
    "--chat-template",
    "--host",
    "--port",
]
SEED_OWNED_FLAGS = {
    "--dist-init-addr": "derived from rank 0's roce_ipv4 and dist_init_port",
    "--node-rank": "derived from spark_rank",
    "--nnodes": "the profile field nnodes",
    "--tp-size": "the profile field tp_size",
    "--pp-size": "the profile field pp_size",
    "--host": "the profile field host",
    "--port": "the profile field port",
    "--api-key": "the vaulted variable sglang_api_key",
    "--model-path": "the profile field model_path",
    "--served-model-name": "the profile field served_model_name",
    "--watchdog-timeout": "the profile field watchdog_timeout",
}


def lookup(dotted):
    spec = {"options": SCHEMA}
    for part in dotted.split("."):
        spec = (spec.get("options") or {}).get(part)
        if spec is None:
            return None
    return spec


def test_the_argument_spec_is_the_one_the_schema_writes():
    assert profile_spec.render(SPEC_TEXT, _profile_schema) == SPEC_TEXT, (
        "roles/sglang/meta/argument_specs.yml differs from the profile schema: make profile-spec"
    )
    assert _profile_schema.argument_spec() == SCHEMA


def test_the_main_entry_point_is_left_alone():
    specs = yaml.safe_load(SPEC_TEXT)["argument_specs"]
    rewritten = yaml.safe_load(profile_spec.render(SPEC_TEXT, _profile_schema))["argument_specs"]
    assert rewritten["main"] == specs["main"]


def test_every_schema_field_is_in_the_spec_with_its_type_default_and_choices():
    names = set()
    for row in _profile_schema.FIELDS:
        if row.get("derived"):
            continue
        names.add(row["name"])
        spec = lookup(row["name"])
        assert spec is not None, row["name"]
        assert spec["type"] == row["type"], row["name"]
        assert spec.get("default") == row["default"], row["name"]
        assert spec.get("choices") == row["choices"], row["name"]
        assert spec.get("elements") == row["elements"], row["name"]

    def walk(options, prefix=""):
        for name, spec in options.items():
            assert f"{prefix}{name}" in names, f"{prefix}{name} is in the spec, not the schema"
            walk(spec.get("options") or {}, f"{prefix}{name}.")

    walk(SCHEMA)


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


def test_the_seed_flags_keep_their_order_and_owners():
    flags = [flag for _field, flag in _engine.server_flags()]
    assert [flag for flag in flags if flag in SEED_FLAG_ORDER] == SEED_FLAG_ORDER
    owned = _inventory_vars.owned_flags()
    assert {flag: owned.get(flag) for flag in SEED_OWNED_FLAGS} == SEED_OWNED_FLAGS


def test_defaults_give_every_field_and_complete_nested_dicts():
    defaults = _profile_schema.defaults()
    assert set(defaults) == set(SCHEMA)
    for name, spec in SCHEMA.items():
        if spec["type"] == "dict" and spec.get("options"):
            assert set(defaults[name]) == set(spec["options"]), name
        else:
            assert defaults[name] == spec.get("default"), name
    assert _profile.resolve({}) == defaults


NEW = _profile_schema._f(
    "speculative.accept_threshold",
    "float",
    flag="--speculative-accept-threshold-single",
    default=0.7,
    owned=True,
)


def test_a_new_schema_line_reaches_every_consumer(monkeypatch):
    """Adding an engine flag is one line of the schema: launch, owned flags, defaults, spec."""
    rows = list(_profile_schema.FIELDS)
    rows.insert(rows.index(next(r for r in rows if r["name"] == "speculative.num_steps")), NEW)
    monkeypatch.setattr(_profile_schema, "FIELDS", tuple(rows))

    profile = _profile.resolve({"speculative": {"algorithm": "EAGLE", "num_steps": 2}})
    assert profile["speculative"]["accept_threshold"] == 0.7
    args = _engine.server_args(profile, 0, "10.0.30.1")
    at = args.index("--speculative-accept-threshold-single")
    assert args[at + 1] == "0.70"
    assert args[at + 2] == "--speculative-num-steps", "the table's order is the launch order"

    owned = _inventory_vars.owned_flags()
    assert owned["--speculative-accept-threshold-single"] == (
        "the profile field speculative.accept_threshold"
    )
    spec = _profile_schema.argument_spec()["speculative"]["options"]["accept_threshold"]
    assert spec == {
        "description": "C(--speculative-accept-threshold-single).",
        "type": "float",
        "default": 0.7,
    }
    written = yaml.safe_load(profile_spec.render(SPEC_TEXT, _profile_schema))
    assert (
        written["argument_specs"]["profile"]["options"]["speculative"]["options"][
            "accept_threshold"
        ]
        == spec
    )


def test_a_new_owned_flag_is_refused_in_extra_args(monkeypatch):
    monkeypatch.setattr(_profile_schema, "FIELDS", (*_profile_schema.FIELDS, NEW))
    assert [flag for _field, flag in _engine.server_flags()][-1] == NEW["flag"]
    engine = {
        "nnodes": 1,
        "tp_size": 1,
        "port": 8081,
        "extra_args": [f"{NEW['flag']}=0.9"],
    }
    node = {"host": "spark-1", "spark_rank": 0, "roce_ipv4": "10.0.30.1"}
    errors, _warnings, _ranks = _inventory.check_cluster([node], engine)
    assert any(
        f"extra_args contains {NEW['flag']}; fix: remove it: it is the profile field "
        "speculative.accept_threshold" in error
        for error in errors
    ), errors
    monkeypatch.setattr(_profile_schema, "FIELDS", tuple(_profile_schema.FIELDS[:-1]))
    errors, _warnings, _ranks = _inventory.check_cluster([node], engine)
    assert not any(NEW["flag"] in error for error in errors), errors


def test_defaults_fill_fields_nested_more_than_one_level():
    table = (
        _profile_schema._f("a", "dict", "A."),
        _profile_schema._f("a.b", "dict", "B."),
        _profile_schema._f("a.b.c", "int", "C.", default=3),
        _profile_schema._f("a.d", "str", "D.", default="x"),
    )
    assert _profile_schema.defaults(table) == {"a": {"b": {"c": 3}, "d": "x"}}
