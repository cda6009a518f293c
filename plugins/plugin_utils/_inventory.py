# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Offline checks of one cluster's inventory (no host is contacted).

Every problem is reported as ``<host>: <variable> <what is wrong>; fix: <how>``
so an operator can correct a new cluster folder before touching the rack.

check_cluster runs the checks in a fixed order: the nodes (_inventory_nodes.py), their
data-plane functions (_inventory_functions.py), the profile (_inventory_engine.py), the weights
and the Hugging Face token (_inventory_weights.py). The variables they read:
_inventory_vars.py; what a playbook's own run variables lack: _inventory_run.py; variables no
role declares and an inventory without nodes: _inventory_read.py.
"""

from __future__ import annotations

from ansible_collections.sparkfleet.serving.plugins.module_utils._weights import hf_token_sent
from ansible_collections.sparkfleet.serving.plugins.plugin_utils._inventory_engine import (
    check_engine,
)
from ansible_collections.sparkfleet.serving.plugins.plugin_utils._inventory_functions import (
    check_functions,
)
from ansible_collections.sparkfleet.serving.plugins.plugin_utils._inventory_nodes import (
    check_addresses,
    check_consistent,
    check_control_paths,
    check_nics,
    check_ranks,
    check_roce,
    check_url_vars,
)
from ansible_collections.sparkfleet.serving.plugins.plugin_utils._inventory_report import Report
from ansible_collections.sparkfleet.serving.plugins.plugin_utils._inventory_run import RUN
from ansible_collections.sparkfleet.serving.plugins.plugin_utils._inventory_weights import (
    check_secrets,
    check_weights,
)


def check_cluster(nodes, engine, api_key_set=False, weights=False, hf_token_set=False):
    """Check a cluster. ``nodes``: one dict per host with its inventory values.

    ``weights``: the weights stage runs (model_weights_enabled), so what it would refuse of
    the profile is refused here; ``hf_token_set``: sglang_hf_token is not empty.

    Returns ``(errors, warnings, ranks)``; ``ranks`` maps host to rank for the
    hosts whose rank is usable.
    """
    report = Report()
    if not nodes:
        report.error(
            "cluster",
            "spark_nodes",
            "has no hosts",
            "list the Sparks under spark_nodes in hosts.yml",
        )
        return report.errors, report.warnings, {}
    ranks = check_ranks(nodes, report)
    check_consistent(nodes, report)
    check_addresses(nodes, report)
    check_nics(nodes, report)
    check_functions(nodes, report)
    check_roce(nodes[0], report)
    check_control_paths(nodes[0], report)
    check_url_vars(nodes, report)
    head = next((h for h, r in ranks.items() if r == 0), nodes[0]["host"])
    check_engine(head, engine or {}, len(nodes), api_key_set, report)
    if weights:
        check_weights(head, engine or {}, report)
    check_secrets(nodes, engine or {}, hf_token_set, report)
    return report.errors, report.warnings, ranks


def _functions(node):
    """One node's data-plane functions as 'iface/hca ipv4' (roce_hcas, else the one)."""
    hcas = node.get("roce_hcas") or [
        {
            "iface": node.get("roce_iface"),
            "hca": node.get("roce_hca"),
            "ipv4": node.get("roce_ipv4"),
        }
    ]
    return ", ".join(f"{e.get('iface')}/{e.get('hca')} {e.get('ipv4')}" for e in hcas)


def cluster_summary(
    nodes, ranks, engine, playbook="site", hf_token_set=False, warnings=(), weights=True
):
    """The lines a passing validate ends with: what the checks found, in one place."""
    engine = engine or {}
    by_host = {n["host"]: n for n in nodes}
    order = sorted(ranks, key=lambda h: ranks[h])
    head = order[0] if order else None
    first = nodes[0] if nodes else {}
    endpoint = first.get("model_weights_hf_endpoint") or engine.get("hf_endpoint") or "-"
    trusted = first.get("sglang_hf_token_endpoints") or []
    token = (
        "not set"
        if not hf_token_set
        else "sent there"
        if hf_token_sent(endpoint, trusted)
        else "set, NOT sent there (sglang_hf_token_endpoints)"
    )
    spec = engine.get("speculative") or {}
    lines = [
        f"cluster {first.get('cluster_name') or '-'}: {len(nodes)} node(s), head {head}, "
        f"checked for {RUN.format(playbook)}",
        f"profile {first.get('sglang_profile')}: {engine.get('served_model_name')} "
        f"(TP {engine.get('tp_size')} on {engine.get('nnodes')} node(s)), image "
        f"{engine.get('image')}, API {engine.get('host')}:{engine.get('port')}",
        f"weights {engine.get('model_repo')}@{engine.get('model_revision') or 'unset'}"
        + (
            f", draft {spec.get('draft_model_path')}@{spec.get('draft_model_revision') or 'unset'}"
            if spec.get("draft_model_path")
            else ""
        )
        + (
            f" from {endpoint} (HF token: {token})"
            if weights
            else " (not staged by the collection: model_weights_enabled is false)"
        ),
    ]
    for host in order:
        node = by_host[host]
        lines.append(
            f"rank {ranks[host]} {host}: ssh {node.get('ansible_host') or host}, "
            f"bootstrap {node.get('sglang_nccl_socket_ifname')}, RoCE {_functions(node)}"
        )
    lines.append(f"{len(warnings)} warning(s) above" if warnings else "no warnings")
    return lines


def bring_up_order(ranks):
    """Hosts in start order: workers from rank N-1 down to 1, then the head."""
    return sorted(ranks, key=lambda host: -ranks[host])
