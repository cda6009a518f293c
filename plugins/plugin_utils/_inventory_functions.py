# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Offline checks of roce_hcas: every data-plane function of a node (both halves of a port)."""

from __future__ import annotations

import re

from ansible_collections.sparkfleet.serving.plugins.plugin_utils._inventory_nodes import (
    IFNAME_RE,
    NAME_HINT,
    name_kind_problem,
)
from ansible_collections.sparkfleet.serving.plugins.plugin_utils._inventory_report import (
    as_ipv4,
    as_network,
)

FUNCTION_KEYS = ("hca", "iface", "ipv4", "subnet")
PRIMARY_VARS = {
    "hca": "roce_hca",
    "iface": "roce_iface",
    "ipv4": "roce_ipv4",
    "subnet": "roce_subnet",
}
FIX_SHAPE = "list each function as {hca: ..., iface: ..., ipv4: ..., subnet: ...}"


def check_functions(nodes, report):
    """roce_hcas: every data-plane function of a node (both halves of a 200G port).

    Each entry names hca, iface, ipv4 and subnet; the first is the function the
    single-function variables name; names and addresses are distinct; each address is a
    host of its subnet; the subnets are one list on every node, disjoint from each other
    and from the management network; every address is used once in the cluster.
    """
    mgmt = as_network(nodes[0].get("spark_mgmt_subnet"))
    subnets_of, seen = {}, {}
    for node in nodes:
        host, hcas = node["host"], node.get("roce_hcas")
        if hcas in (None, "", []):
            continue
        if not _check_shape(host, hcas, report):
            continue
        _check_primary(host, node, hcas, report)
        nets = []
        for n, entry in enumerate(hcas):
            nets.append(_check_function(host, n, entry, mgmt, seen, report))
        _check_distinct(host, hcas, nets, report)
        subnets_of[host] = [str(e["subnet"]) for e in hcas]
    _check_same_subnets(nodes, subnets_of, report)


def _check_shape(host, hcas, report):
    """Whether roce_hcas is a list of mappings, each with exactly FUNCTION_KEYS set."""
    if not isinstance(hcas, list) or not all(isinstance(e, dict) for e in hcas):
        report.error(host, "roce_hcas", f"is {hcas!r}, not a list of mappings", FIX_SHAPE)
        return False
    good = True
    for n, entry in enumerate(hcas):
        missing = [k for k in FUNCTION_KEYS if not entry.get(k)]
        extra = sorted(set(entry) - set(FUNCTION_KEYS))
        if missing or extra:
            what = ", ".join(
                ([f"lacks {', '.join(missing)}"] if missing else [])
                + ([f"has unknown {', '.join(extra)}"] if extra else [])
            )
            report.error(host, "roce_hcas", f"entry {n + 1} {what}", FIX_SHAPE)
            good = False
    return good


def _check_primary(host, node, hcas, report):
    """The first entry is the function the single-function variables (roce_hca, ...) name."""
    for key, var in PRIMARY_VARS.items():
        if str(hcas[0][key]) != str(node.get(var) or ""):
            report.error(
                host,
                "roce_hcas",
                f"entry 1 has {key} {hcas[0][key]!r}, but {var} is {node.get(var)!r}",
                f"the first entry is the function {var} names: make them agree",
            )


def _check_function(host, n, entry, mgmt, seen, report):
    """Entry ``n``: its names, its subnet and its address; returns the subnet (None if bad)."""
    where = f"entry {n + 1}"
    _check_function_names(host, where, entry, report)
    net, addr = as_network(entry["subnet"]), as_ipv4(entry["ipv4"])
    if net is None:
        report.error(
            host,
            "roce_hcas",
            f"{where} subnet {entry['subnet']!r} is not an IPv4 network",
            "write it as a.b.c.0/24",
        )
    elif mgmt is not None and net.overlaps(mgmt):
        report.error(
            host,
            "roce_hcas",
            f"{where} subnet {net} overlaps spark_mgmt_subnet {mgmt}",
            "each data-plane function needs its own network",
        )
    if addr is None:
        report.error(
            host,
            "roce_hcas",
            f"{where} ipv4 {entry['ipv4']!r} is not an IPv4 address",
            "set the function's data-plane address",
        )
    elif net is not None and (
        addr not in net or addr in (net.network_address, net.broadcast_address)
    ):
        report.error(
            host,
            "roce_hcas",
            f"{where} ipv4 {addr} is not a host address of {net}",
            f"use an address inside {net}",
        )
    elif n > 0:  # the first function's address is roce_ipv4's, checked with it
        if addr in seen:
            report.error(
                host,
                "roce_hcas",
                f"{where} ipv4 {addr} is also used by {seen[addr]}",
                "every address is unique",
            )
        seen[addr] = f"{host} (roce_hcas {where})"
    return net


def _check_function_names(host, where, entry, report):
    """An entry's iface is a NIC name and its hca an RDMA device (not swapped)."""
    iface_bad = name_kind_problem("iface", entry["iface"], "netdev")
    hca_bad = name_kind_problem("hca", entry["hca"], "hca")
    if iface_bad or hca_bad:
        swapped = iface_bad and hca_bad
        report.error(
            host,
            "roce_hcas",
            f"{where} has iface and hca swapped ({entry['iface']!r} is an HCA, "
            f"{entry['hca']!r} a NIC)"
            if swapped
            else f"{where} {'iface ' + iface_bad if iface_bad else 'hca ' + hca_bad}",
            (
                f"write hca: {entry['iface']}, iface: {entry['hca']}"
                if swapped
                else "hca names the RDMA device, iface its netdev"
            )
            + f" ({NAME_HINT})",
        )
    if not IFNAME_RE.match(str(entry["iface"])):
        report.error(
            host,
            "roce_hcas",
            f"{where} iface {entry['iface']!r} is not a NIC name",
            "name the function's netdev, e.g. enP2p1s0f0np0",
        )
    if not re.match(r"^[A-Za-z0-9_.-]{1,64}$", str(entry["hca"])):
        report.error(
            host,
            "roce_hcas",
            f"{where} hca {entry['hca']!r} is not an RDMA device",
            "name the function's HCA, e.g. roceP2p1s0f0",
        )


def _check_distinct(host, hcas, nets, report):
    """A node's functions name each HCA and netdev once and have disjoint subnets."""
    for key in ("hca", "iface"):
        names = [str(e[key]) for e in hcas]
        for name in sorted({x for x in names if names.count(x) > 1}):
            report.error(
                host,
                "roce_hcas",
                f"names {key} {name} twice",
                "each function has its own HCA and netdev",
            )
    for i, a in enumerate(nets):
        for b in nets[i + 1 :]:
            if a is not None and b is not None and a.overlaps(b):
                report.error(
                    host,
                    "roce_hcas",
                    f"subnets {a} and {b} overlap",
                    "each function of the port has its own subnet",
                )


def _check_same_subnets(nodes, subnets_of, report):
    """Every node lists the same subnets (a node without roce_hcas: its roce_subnet)."""
    first = next(iter(subnets_of.items()), None)
    for node in nodes:
        host = node["host"]
        mine = subnets_of.get(host, [str(node.get("roce_subnet") or "")])
        if first and mine != first[1]:
            report.error(
                host,
                "roce_hcas",
                f"gives the subnets {', '.join(mine)}, {first[0]} gives {', '.join(first[1])}",
                "every node uses the same data-plane functions: list them on every host",
            )
