"""The register of variables (meta/variables.yml) and the files written from it (issue 45).

Each variable is declared once there; every role's argument specs and defaults are written
from it by tools/register.py (make role-docs), the converge stages' inputs and the
inventory checks' cluster variables are read from it.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import shutil

import pytest
import yaml

from ansible_collections.sparkfleet.serving.plugins.filter import converge
from ansible_collections.sparkfleet.serving.plugins.plugin_utils import _inventory_vars, _register

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
_tool = importlib.util.spec_from_file_location(
    "register_tool", os.path.join(ROOT, "tools", "register.py")
)
tool = importlib.util.module_from_spec(_tool)
_tool.loader.exec_module(tool)
VARIABLES = _register.load()["variables"]


def _specs():
    for path in sorted(glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml"))):
        role = path.split(os.sep)[-3]
        with open(path, encoding="utf-8") as handle:
            for entry, spec in yaml.safe_load(handle)["argument_specs"].items():
                if (role, entry) != ("sglang", "profile"):  # the profile's fields, not variables
                    yield role, entry, spec.get("options") or {}


def test_the_generated_files_are_current():
    assert [os.path.relpath(item[0], ROOT) for item in tool.stale()] == [], "run make role-docs"


def test_every_option_is_declared_once():
    entries = [(role, entry, name) for role, entry, options in _specs() for name in options]
    names = {name for _r, _e, name in entries}
    assert names == set(VARIABLES)
    # The target: at most 1.1 option entries per distinct option (1.91 before).
    assert len(entries) / len(names) <= 1.1
    for role, entry, options in _specs():
        for name, spec in options.items():
            assert _register.owner(VARIABLES[name]) == (role, entry)
            assert spec == _register.spec(VARIABLES[name]), name


def test_each_role_defaults_hold_the_register_values():
    for name, record in VARIABLES.items():
        role = _register.owner(record)[0]
        with open(
            os.path.join(ROOT, "roles", role, "defaults", "main.yml"), encoding="utf-8"
        ) as handle:
            defaults = yaml.safe_load(handle) or {}
        if record.get("in_defaults", True) and ("value" in record or "default" in record):
            assert defaults[name] == record.get("value", record.get("default")), name
        else:
            assert name not in defaults, name


def test_stage_inputs_are_what_the_register_says_each_entry_point_reads():
    roce = converge.converge_inputs(["roce"])
    # Cluster variables the roce stage reads (owned by cluster), its own, not the fact it sets.
    assert {"roce_mtu", "roce_iface", "roce_ipv4", "roce_netplan_file"} <= set(roce)
    assert "roce_node" not in roce and "sglang_engine" not in roce
    # The launch stage reads the fact the roce stage publishes.
    assert "roce_node" in converge.converge_inputs(["sglang_node:main"])
    assert converge.converge_inputs(["sglang_node:answers"]) == ["sglang_api_url"]


def test_cluster_variables_come_from_the_register():
    scoped = {name: r["scope"] for name, r in VARIABLES.items() if r["scope"] != "role"}
    assert scoped == _inventory_vars.CLUSTER_VARS
    assert _inventory_vars.CLUSTER_VARS["spark_rank"] == "host"
    assert _inventory_vars.CLUSTER_VARS["roce_mtu"] == "cluster"


@pytest.fixture
def copy(tmp_path):
    """The register, the tools' inputs and the roles' generated files in a scratch tree."""
    shutil.copytree(os.path.join(ROOT, "meta"), tmp_path / "meta")
    shutil.copytree(
        os.path.join(ROOT, "plugins", "module_utils"), tmp_path / "plugins" / "module_utils"
    )
    for role in _register.load()["roles"]:
        for sub in ("meta", "defaults"):
            shutil.copytree(os.path.join(ROOT, "roles", role, sub), tmp_path / "roles" / role / sub)
    _register.load.cache_clear()
    yield tmp_path
    _register.load.cache_clear()


def test_an_edit_of_the_register_names_every_stale_file(copy):
    path = copy / "meta" / "variables.yml"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("    default: 9000\n", "    default: 9100\n", 1), encoding="utf-8")
    stale = sorted(os.path.relpath(item[0], copy) for item in tool.stale(str(copy)))
    assert stale == ["roles/cluster/defaults/main.yml", "roles/cluster/meta/argument_specs.yml"]


def test_a_variable_of_no_entry_point_is_refused(copy):
    path = copy / "meta" / "variables.yml"
    text = path.read_text(encoding="utf-8")
    path.write_text(
        text.replace("    role: roce\n", "    role: roce:nowhere\n", 1), encoding="utf-8"
    )
    with pytest.raises(_register.RegisterError, match=r"variable roce_\w+ belongs to roce:nowhere"):
        _register.load(str(copy))


def test_a_reference_to_another_entry_points_variable_is_qualified():
    # The register names any variable as O(name); an entry point's own stay bare.
    assert tool.qualify("for O(watchdog_hold_s) or O(x=1)", "cluster", "hold") == (
        "for O(sparkfleet.serving.cluster#role:main:watchdog_hold_s) or O(x=1)"
    )
    assert tool.qualify(["O(roce_mtu=9000)"], "cluster", "main") == ["O(roce_mtu=9000)"]
