"""Every role's argument spec lists what it reads from the inventory and earlier stages.

A role that reads a cluster variable (role sparkfleet.serving.cluster) or a fact another
stage publishes must document it in its own meta/argument_specs.yml (issue 13), unless the
role sets it itself.
"""

from __future__ import annotations

import glob
import os
import re

import pytest
import yaml

from ansible_collections.sparkfleet.serving.plugins.plugin_utils import _inventory_vars

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
# Facts and variables one stage publishes for the next ones.
STAGE_FACTS = (
    "preflight_cluster",
    "roce_node",
    "sglang_patches_node",
    "sglang_engine",
    "sglang_api_url",
    "sglang_api_key",
    "sglang_hf_token",
    "model_weights_repaired",
)
# Named only inside a message, not read.
NOT_READ = {"sglang_patches": {"sglang_profile_overrides"}}
ROLES = sorted(os.path.basename(p) for p in glob.glob(os.path.join(REPO, "roles", "*")))


def _text(role):
    parts = []
    for sub in ("tasks", "templates", "vars", "defaults", "handlers"):
        for path in glob.glob(os.path.join(REPO, "roles", role, sub, "*")):
            with open(path, encoding="utf-8") as handle:
                parts.append(handle.read())
    return "\n".join(parts)


def _documented(role):
    with open(
        os.path.join(REPO, "roles", role, "meta", "argument_specs.yml"), encoding="utf-8"
    ) as h:
        specs = yaml.safe_load(h)["argument_specs"]
    return {name for entry in specs.values() for name in (entry.get("options") or {})}


@pytest.mark.parametrize("role", ROLES)
def test_role_documents_what_it_reads(role):
    text = _text(role)
    documented = _documented(role)
    missing = []
    for var in (*_inventory_vars.CLUSTER_VARS, *STAGE_FACTS):
        if var in NOT_READ.get(role, ()) or not re.search(rf"\b{var}\b", text):
            continue
        set_here = re.search(rf"^\s+{var}:|register:\s+{var}\b", text, re.M)
        if var not in documented and not set_here:
            missing.append(var)
    assert not missing, f"roles/{role}/meta/argument_specs.yml does not list {missing}"
