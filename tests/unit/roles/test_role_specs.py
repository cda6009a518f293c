"""The register says which roles read each cluster variable and each stage's fact.

A role that reads a cluster variable or a fact another stage publishes must be its owner
or one of its ``read_by`` in meta/variables.yml (issue 13, issue 45): that is its converge
stage's input list and its README's "Also reads". A role that only sets it is exempt.
"""

from __future__ import annotations

import glob
import os
import re

import pytest

from ansible_collections.sparkfleet.serving.plugins.plugin_utils import _inventory_vars, _register

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
    return {name for name, roles in _register.declared().items() if role in roles}


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
    assert not missing, f"meta/variables.yml does not say role {role} reads {missing}"
