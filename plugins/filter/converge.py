# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Controller side of converge: a stage's inputs, their digest, and why it must run."""

from __future__ import annotations

import functools
import os

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkfleet.serving.plugins.module_utils._converge import (
    LIVE,
    digest,
    launch_config_hash,
    stamp_reasons,
    tree_digest,
)
from ansible_collections.sparkfleet.serving.plugins.plugin_utils import _register
from ansible_collections.sparkfleet.serving.plugins.plugin_utils._inventory_vars import CLUSTER_VARS

# plugins/filter/converge.py -> the collection's root.
COLLECTION = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _role_dir(role):
    path = os.path.join(COLLECTION, "roles", role)
    if not os.path.isdir(path):
        raise AnsibleFilterError(f"converge: no role {role!r} in {COLLECTION}")
    return path


def _split(item):
    """``role`` (every entry point) or ``role:entry`` (that entry point only)."""
    role, _sep, entry = str(item).partition(":")
    return role, entry or None


@functools.lru_cache(maxsize=None)
def _inputs(item):
    role, entry = _split(item)
    _role_dir(role)
    if entry is not None and entry not in _register.load()["roles"].get(role, {}):
        raise AnsibleFilterError(f"converge: role {role} has no entry point {entry!r}")
    return _register.stage_inputs(item)


@functools.lru_cache(maxsize=None)
def _tree(path):
    return tree_digest(path)


def converge_inputs(roles):
    """Every variable the register (meta/variables.yml) says ``roles`` read: what the stage reads.

    An item ``role:entry`` takes that entry point's options only."""
    names = set()
    for role in [roles] if isinstance(roles, str) else roles:
        names.update(_inputs(role))
    return sorted(names)


def converge_digest(values, roles):
    """Digest of a stage: its inputs' values, its roles' files and the collection's plugins."""
    roles = [roles] if isinstance(roles, str) else list(roles)
    trees = [_tree(_role_dir(_split(role)[0])) for role in roles]
    trees.append(_tree(os.path.join(COLLECTION, "plugins")))
    return digest(values, trees)


def warm():
    """Read the register of variables and digest every role's files and the plugins now.

    Called by the controller's main process (filter preload) before any worker forks: each
    stage's decision in each worker then finds them in these caches instead of reading and
    hashing the files again, once per stage and host."""
    for role, entries in _register.load()["roles"].items():
        for entry in entries:
            _inputs(f"{role}:{entry}")
        _tree(_role_dir(role))
    _tree(os.path.join(COLLECTION, "plugins"))


def converge_cluster_view(nodes, names):
    """What a stage's digest takes of every node's cluster variables (preflight_cluster.nodes).

    Every node's identity (its name and the variables of scope host: rank and addresses,
    which peers read) and the stage's own inputs ``names``: a profile change then leaves a
    stage that does not read the profile (roce) alone. A stage that reads the profile declares
    its own resolved profile (sglang_engine), the same on every node."""
    if not isinstance(nodes, list):
        return nodes
    keep = set(names) | {"host"} | {var for var, scope in CLUSTER_VARS.items() if scope == "host"}
    return [{k: v for k, v in node.items() if k in keep} for node in nodes]


def converge_reasons(probe, stamp_path, stage, want_digest):
    """Why ``stage`` must run on the node ``probe`` (spark_node_info) describes; [] when not."""
    record = ((probe or {}).get("stamps") or {}).get(stamp_path)
    if record is None:
        raise AnsibleFilterError(f"converge_reasons: the probe did not read {stamp_path}")
    return stamp_reasons(stage, want_digest, record, record.get("actual"))


def converge_outputs(probe, stamp_path):
    """The facts a stage published when it last ran (its stamp's outputs), {} when none."""
    record = ((probe or {}).get("stamps") or {}).get(stamp_path) or {}
    content = record.get("content")
    return (content or {}).get("outputs") or {} if isinstance(content, dict) else {}


def converge_live(probe, check, want=None):
    """Live differences the probe shows for one check: roce, image or rank."""
    if check not in LIVE:
        raise AnsibleFilterError(f"converge_live: unknown check {check!r}, one of {sorted(LIVE)}")
    try:
        return LIVE[check](probe or {}, dict(want or {}))
    except KeyError as exc:
        raise AnsibleFilterError(f"converge_live({check}): missing {exc}") from exc


def sparkfleet_launch_config_hash(file_sha256s):
    """A rank's configuration hash from the sha256 of its launcher, env file and patched files."""
    return launch_config_hash(list(file_sha256s))


class FilterModule:
    def filters(self):
        return {
            "converge_inputs": converge_inputs,
            "converge_digest": converge_digest,
            "converge_cluster_view": converge_cluster_view,
            "converge_reasons": converge_reasons,
            "converge_outputs": converge_outputs,
            "converge_live": converge_live,
            "launch_config_hash": sparkfleet_launch_config_hash,
        }
