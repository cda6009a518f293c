# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Offline checks of the nodes: ranks, addresses, NIC and HCA names, RoCE, control paths.

The data-plane functions (roce_hcas): _inventory_functions.py; the profile: _inventory_engine.py.
"""

from __future__ import annotations

import posixpath
import re

from ansible_collections.sparkfleet.serving.plugins.plugin_utils._inventory_report import (
    as_count,
    as_ipv4,
    as_network,
    url_problem,
)
from ansible_collections.sparkfleet.serving.plugins.plugin_utils._inventory_vars import (
    CLUSTER_WIDE,
    CONTROL_PATHS,
    URL_VARS,
)

IFNAME_RE = re.compile(r"^[A-Za-z0-9_.:@-]{1,15}$")
# How the kernel names an RDMA device (rdma link show: rocep1s0f0, roceP2p1s0f0, mlx5_0) and a
# network interface (ip -br link: enp1s0f0np0, enP2p1s0f0np0, eth0): a name of the one kind
# where the other is asked for is a swap, whatever else it looks like.
HCA_NAME_RE = re.compile(r"^(roce|mlx[0-9]+_|irdma|bnxt_re|rxe|siw|efa|qedr|hns_)")
NETDEV_NAME_RE = re.compile(r"^(en|eth|wl|ww|bond|br-|vlan|team)")
NAME_HINT = (
    "rdma link show lists each HCA with its netdev (link rocep1s0f0/1 ... netdev enp1s0f0np0)"
)
MIN_ROCE_MTU = 9000
MAX_ROCE_MTU = 9978  # ConnectX-7 port maximum


def check_ranks(nodes, report):
    ranks = {}
    for node in nodes:
        host, raw = node["host"], node.get("spark_rank")
        if raw is None:
            report.error(
                host,
                "spark_rank",
                "is not set",
                "give every node a rank (0 = head, 1..N-1 workers)",
            )
            continue
        rank = as_count(raw)
        if rank is None:
            report.error(
                host, "spark_rank", f"is {raw!r}, not a non-negative integer", "use 0..N-1"
            )
            continue
        ranks.setdefault(rank, []).append(host)
    for rank, hosts in sorted(ranks.items()):
        if len(hosts) > 1:
            for host in hosts[1:]:
                report.error(
                    host,
                    "spark_rank",
                    f"{rank} is also the rank of {hosts[0]}",
                    "ranks are unique; renumber 0..N-1",
                )
    count = len(nodes)
    for rank, hosts in sorted(ranks.items()):
        if rank >= count:
            report.error(
                hosts[0],
                "spark_rank",
                f"{rank} is out of range for {count} nodes",
                f"ranks run 0..{count - 1} with no gaps",
            )
    missing = [r for r in range(count) if r not in ranks]
    if missing and len(ranks) == count - sum(len(h) - 1 for h in ranks.values()):
        report.error(
            "cluster",
            "spark_rank",
            f"has gaps: no node has rank {', '.join(map(str, missing))}",
            f"number the {count} nodes 0..{count - 1}",
        )
    if 0 not in ranks and nodes:
        report.error(
            "cluster",
            "spark_rank",
            "0 (the head) is missing",
            "give exactly one node spark_rank: 0",
        )
    return {hosts[0]: rank for rank, hosts in ranks.items()}


def check_consistent(nodes, report):
    if not nodes:
        return
    first = nodes[0]
    for var in CLUSTER_WIDE:
        for node in nodes[1:]:
            if node.get(var) != first.get(var):
                report.error(
                    node["host"],
                    var,
                    f"differs from {first['host']}'s",
                    "it is cluster-wide: set it once in group_vars/spark_nodes, not per host",
                )


def check_addresses(nodes, report):
    mgmt_subnet = (
        as_network(nodes[0].get("spark_mgmt_subnet")) if nodes[0].get("spark_mgmt_subnet") else None
    )
    if nodes[0].get("spark_mgmt_subnet") and mgmt_subnet is None:
        report.error(
            nodes[0]["host"],
            "spark_mgmt_subnet",
            f"{nodes[0].get('spark_mgmt_subnet')!r} is not an IPv4 network",
            "write it as a.b.c.0/24",
        )
    roce_subnet = as_network(nodes[0].get("roce_subnet"))
    if roce_subnet is None:
        report.error(
            nodes[0]["host"],
            "roce_subnet",
            f"{nodes[0].get('roce_subnet')!r} is not an IPv4 network",
            "write the data-plane network as a.b.c.0/24",
        )
    if mgmt_subnet and roce_subnet and mgmt_subnet.overlaps(roce_subnet):
        report.error(
            nodes[0]["host"],
            "roce_subnet",
            f"{roce_subnet} overlaps spark_mgmt_subnet {mgmt_subnet}",
            "the data plane needs its own network",
        )
    seen = {}
    for node in nodes:
        host = node["host"]
        for var, subnet, plane in (
            ("ansible_host", mgmt_subnet, "management"),
            ("roce_ipv4", roce_subnet, "data-plane"),
        ):
            raw = node.get(var)
            addr = as_ipv4(raw)
            if addr is None:
                report.error(
                    host,
                    var,
                    f"is {raw!r}, not an IPv4 address",
                    f"set the node's {plane} IPv4 address",
                )
                continue
            if subnet is not None and (
                addr not in subnet or addr in (subnet.network_address, subnet.broadcast_address)
            ):
                subnet_var = "spark_mgmt_subnet" if var == "ansible_host" else "roce_subnet"
                report.error(
                    host,
                    var,
                    f"{addr} is not a host address of {subnet_var} {subnet}",
                    f"use an address inside {subnet} or correct {subnet_var}",
                )
            if addr in seen:
                report.error(
                    host, var, f"{addr} is also used by {seen[addr]}", "every address is unique"
                )
            else:
                seen[addr] = f"{node['host']} ({var})"


def check_nics(nodes, report):
    for node in nodes:
        host = node["host"]
        for var in ("spark_mgmt_iface", "roce_iface", "sglang_nccl_socket_ifname"):
            value = node.get(var)
            if not value or not IFNAME_RE.match(str(value)):
                report.error(
                    host,
                    var,
                    f"is {value!r}, not a network interface name",
                    "name the NIC, e.g. enp1s0f0np0",
                )
        hca = node.get("roce_hca")
        if not hca or not re.match(r"^[A-Za-z0-9_.-]{1,64}$", str(hca)):
            report.error(
                host,
                "roce_hca",
                f"is {hca!r}, not an RDMA device name",
                "name the HCA, e.g. rocep1s0f0",
            )
        _check_name_kinds(host, node, report)
        if node.get("spark_mgmt_iface") and node.get("spark_mgmt_iface") == node.get("roce_iface"):
            report.error(
                host,
                "roce_iface",
                f"is the management NIC {node.get('roce_iface')}",
                "the data plane runs on its own NIC",
            )
        socket_if = node.get("sglang_nccl_socket_ifname")
        if socket_if and socket_if == node.get("roce_iface"):
            report.warn(
                host,
                "sglang_nccl_socket_ifname",
                f"puts NCCL's bootstrap on the RoCE NIC {socket_if}",
                "a second, older IPv4 on that NIC hangs the bootstrap (seed Pitfall 1); "
                "keep it on the management NIC (the host checks verify reachability)",
            )
        root = node.get("roce_sysfs_root")
        if not root or not str(root).startswith("/"):
            report.error(
                host,
                "roce_sysfs_root",
                f"is {root!r}",
                "give an absolute path (/sys/class/infiniband)",
            )


def name_kind_problem(var, value, want):
    """Why ``value`` of ``var`` is the other kind of name (None when it is not)."""
    text = str(value or "")
    if want == "netdev" and HCA_NAME_RE.match(text):
        return f"is {text!r}, an RDMA device (HCA) name, not a network interface"
    if want == "hca" and NETDEV_NAME_RE.match(text):
        return f"is {text!r}, a network interface name, not an RDMA device (HCA)"
    return None


def _check_name_kinds(host, node, report):
    """A NIC given where an HCA is asked for, or the reverse (roce_iface and roce_hca swapped)."""
    iface, hca = node.get("roce_iface"), node.get("roce_hca")
    iface_bad = name_kind_problem("roce_iface", iface, "netdev")
    hca_bad = name_kind_problem("roce_hca", hca, "hca")
    if iface_bad and hca_bad:
        report.error(
            host,
            "roce_iface/roce_hca",
            f"are swapped: roce_iface {iface_bad[3:]}, roce_hca {hca_bad[3:]}",
            f"set roce_iface: {hca} and roce_hca: {iface} ({NAME_HINT})",
        )
    elif iface_bad:
        report.error(
            host, "roce_iface", iface_bad, f"give the function's netdev there ({NAME_HINT})"
        )
    elif hca_bad:
        report.error(host, "roce_hca", hca_bad, f"give the function's HCA there ({NAME_HINT})")
    for var in ("spark_mgmt_iface", "sglang_nccl_socket_ifname"):
        problem = name_kind_problem(var, node.get(var), "netdev")
        if problem:
            report.error(host, var, problem, f"name the network interface ({NAME_HINT})")


def check_control_paths(node, report):
    """The control programs' paths: absolute and distinct (cluster-wide, so one node's)."""
    seen = {}
    for var in CONTROL_PATHS:
        path = node.get(var)
        if path is None:  # not in scope (a play without the cluster role): nothing to check
            continue
        if not posixpath.isabs(str(path)) or posixpath.normpath(str(path)) in ("/", "//"):
            report.error(
                node["host"],
                var,
                f"is {path!r}, not an absolute file path",
                "give an absolute path, or remove it for the default (roles/cluster)",
            )
        elif path in seen:
            report.error(
                node["host"],
                var,
                f"is {path!r}, the same file as {seen[path]}",
                "give each control program and the description a path of its own",
            )
        seen.setdefault(path, var)


def check_roce(node, report):
    host = node["host"]
    mtu = as_count(node.get("roce_mtu"))
    if mtu is None or not MIN_ROCE_MTU <= mtu <= MAX_ROCE_MTU:
        report.error(
            host,
            "roce_mtu",
            f"is {node.get('roce_mtu')!r}",
            f"RoCE needs jumbo frames: {MIN_ROCE_MTU}..{MAX_ROCE_MTU}, normally 9000",
        )
    if node.get("roce_gid_mode") not in ("discover", "auto"):
        report.error(
            host, "roce_gid_mode", f"is {node.get('roce_gid_mode')!r}", "use discover or auto"
        )


def check_url_vars(nodes, report):
    """URL_VARS a node sets: one line per value, naming every host that sets it."""
    by_value = {}
    for node in nodes:
        for var in URL_VARS:
            value = node.get(var)
            if value not in (None, "") and url_problem(value):
                by_value.setdefault((var, str(value)), []).append(node["host"])
    for (var, value), hosts in by_value.items():
        report.error(
            ", ".join(hosts),
            var,
            url_problem(value),
            f"give the mirror's URL, e.g. https://hf-mirror.com, or {URL_VARS[var]}",
        )
