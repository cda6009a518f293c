"""The cluster variables have one home: the role sparkfleet.serving.cluster.

Its defaults and argument spec, the checks' table (``_inventory_vars.CLUSTER_VARS``, which
the action plugin reads) and the roles that read the variables must agree.
"""

from __future__ import annotations

import glob
import os

import yaml

from ansible_collections.sparkfleet.serving.plugins.action import cluster_info
from ansible_collections.sparkfleet.serving.plugins.plugin_utils import _inventory_vars

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ROLE = os.path.join(REPO, "roles", "cluster")


def _load(path):
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle) or {}


DEFAULTS = _load(os.path.join(ROLE, "defaults", "main.yml"))
SPEC = _load(os.path.join(ROLE, "meta", "argument_specs.yml"))["argument_specs"]["main"]["options"]


def test_the_checks_read_exactly_the_documented_variables():
    assert sorted(cluster_info.NODE_VARS) == sorted(SPEC)
    assert sorted(_inventory_vars.CLUSTER_VARS) == sorted(SPEC)


def test_cluster_wide_means_what_the_spec_says():
    for var, scope in _inventory_vars.CLUSTER_VARS.items():
        assert scope in ("host", "node", "cluster"), var
        words = {"host": "Per host", "node": "Per node", "cluster": "Cluster-wide"}[scope]
        description = SPEC[var]["description"]
        first = description[0] if isinstance(description, list) else description
        assert first.startswith(words), (var, first)
    assert set(_inventory_vars.CLUSTER_WIDE) == {
        v for v, s in _inventory_vars.CLUSTER_VARS.items() if s == "cluster"
    }


def test_defaults_and_spec_agree():
    for var, value in DEFAULTS.items():
        assert var in SPEC, f"{var} has a default but no documentation"
        assert SPEC[var].get("default") == value, var
    for var, spec in SPEC.items():
        if "default" in spec:
            assert DEFAULTS.get(var) == spec["default"], var


def test_no_other_role_sets_a_default_for_a_cluster_variable():
    for path in glob.glob(os.path.join(REPO, "roles", "*", "defaults", "main.yml")):
        if path.startswith(ROLE + os.sep):
            continue
        doubled = set(_load(path)) & set(_inventory_vars.CLUSTER_VARS)
        assert not doubled, f"{path} sets {sorted(doubled)}: they live in roles/cluster"


def _depends_on_cluster(role, seen=()):
    meta = _load(os.path.join(REPO, "roles", role, "meta", "main.yml"))
    for dep in meta.get("dependencies") or []:
        name = (dep["role"] if isinstance(dep, dict) else dep).split(".")[-1]
        if name == "cluster" or (name not in seen and _depends_on_cluster(name, (*seen, role))):
            return True
    return False


def test_every_role_has_the_cluster_defaults_in_scope():
    roles = sorted(os.path.basename(p) for p in glob.glob(os.path.join(REPO, "roles", "*")))
    missing = [r for r in roles if r != "cluster" and not _depends_on_cluster(r)]
    assert not missing, f"roles without sparkfleet.serving.cluster as a dependency: {missing}"


def test_roles_that_document_a_cluster_variable_give_its_one_default():
    for path in glob.glob(os.path.join(REPO, "roles", "*", "meta", "argument_specs.yml")):
        for entry in (_load(path).get("argument_specs") or {}).values():
            for var, spec in (entry.get("options") or {}).items():
                if var in _inventory_vars.CLUSTER_VARS and "default" in spec:
                    assert spec["default"] == DEFAULTS.get(var), f"{path}: {var}"
