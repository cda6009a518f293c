# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Offline checks of one cluster's inventory (no host is contacted).

Every problem is reported as ``<host>: <variable> <what is wrong>; fix: <how>``
so an operator can correct a new cluster folder before touching the rack.
"""

from __future__ import annotations

import ipaddress
import os
import posixpath
import re
from urllib.parse import urlsplit

from ansible_collections.sparkfleet.serving.plugins.module_utils._control import confirm_problem
from ansible_collections.sparkfleet.serving.plugins.module_utils._engine import speculative_window
from ansible_collections.sparkfleet.serving.plugins.module_utils._profile import nearest
from ansible_collections.sparkfleet.serving.plugins.module_utils._profile_schema import (
    owned_flags as schema_owned_flags,
)
from ansible_collections.sparkfleet.serving.plugins.module_utils._upgrade import (
    offline_problems as upgrade_offline_problems,
)
from ansible_collections.sparkfleet.serving.plugins.module_utils._weights import (
    COMMIT_RE,
    hf_token_sent,
)
from ansible_collections.sparkfleet.serving.plugins.module_utils._weights import (
    plan as weights_plan,
)

# The cluster variables the checks read, with how far each may differ between hosts:
# "host" is set on every host and differs (identity), "node" may differ (a NIC name after a
# swap), "cluster" must be equal everywhere. Their defaults and documentation live in one
# place, the role sparkfleet.serving.cluster (tests/unit check that the two agree).
CLUSTER_VARS = {
    "spark_rank": "host",
    "ansible_host": "host",
    "roce_ipv4": "host",
    "roce_hcas": "host",
    "spark_mgmt_iface": "node",
    "spark_mgmt_subnet": "cluster",
    "roce_iface": "node",
    "roce_hca": "node",
    "roce_subnet": "cluster",
    "roce_mtu": "cluster",
    "roce_gid_mode": "cluster",
    "roce_sysfs_root": "node",
    "sglang_nccl_socket_ifname": "node",
    "sglang_profile": "cluster",
    "sglang_profile_overrides": "cluster",
    "cluster_name": "cluster",
    # Where the Hugging Face token may go besides huggingface.co (the mirrors the site trusts).
    "sglang_hf_token_endpoints": "cluster",
    # The cluster's control programs and description: every role that runs or writes
    # one reads these names (the remote forced command, the canary, drills, upgrades).
    "sglang_node_bin": "cluster",
    "watchdog_cluster_bin": "cluster",
    "watchdog_bin": "cluster",
    "watchdog_config_file": "cluster",
    "watchdog_lib_dir": "cluster",
    "watchdog_state_dir": "cluster",
    "cluster_production_bin": "cluster",
}
# The control paths among them (absolute paths, checked so).
CONTROL_PATHS = (
    "sglang_node_bin",
    "watchdog_cluster_bin",
    "watchdog_bin",
    "watchdog_config_file",
    "watchdog_lib_dir",
    "watchdog_state_dir",
    "cluster_production_bin",
)
CLUSTER_WIDE = tuple(var for var, scope in CLUSTER_VARS.items() if scope == "cluster")
# Flags the collection derives per node or from dedicated fields; an extra_args
# copy would fight the derived one. The profile schema marks which (owned_flags).
OTHER_OWNED_FLAGS = {"--api-key": "the vaulted variable sglang_api_key"}


def owned_flags():
    """SGLang flag -> what sets it, for every flag extra_args may not repeat."""
    return {**schema_owned_flags(), **OTHER_OWNED_FLAGS}


# Environment keys the collection sets for every rank, with what sets them: a copy
# in the profile's env would silently replace the derived value.
OWNED_ENV = {
    "NCCL_SOCKET_IFNAME": "the variable sglang_nccl_socket_ifname",
    "NCCL_IB_HCA": "the variables roce_hca and roce_hcas",
    "NCCL_IB_ADDR_RANGE": "the variables roce_subnet and roce_hcas",
    "NCCL_IB_GID_INDEX": "discovered per node by the roce role (roce_gid_mode)",
    "NCCL_IB_ROCE_VERSION_NUM": "discovered per node by the roce role",
    "MASTER_ADDR": "derived from rank 0's roce_ipv4",
    "MASTER_PORT": "the profile field dist_init_port",
    "GLOO_SOCKET_IFNAME": "the variable sglang_nccl_socket_ifname",
    "SGLANG_HOST_IP": "derived per node from the first IPv4 of sglang_nccl_socket_ifname",
    "HOST_IP": "SGLang's fallback for SGLANG_HOST_IP, derived per node",
    "PYTHONDONTWRITEBYTECODE": "set so patched sources recompile (seed Pitfall 6)",
    "SGLANG_API_KEY": "the vaulted variable sglang_api_key",
    "HF_ENDPOINT": "the profile field hf_endpoint",
    "HF_HUB_DISABLE_XET": "the profile field hf_disable_xet",
    "HF_TOKEN": "the vaulted variable sglang_hf_token",
    "SPARKFLEET_MODEL_REVISION": "the profile field model_revision (the staged weights' pin)",
}
# Every other HF_* key belongs to the collection's weights handling.
OWNED_ENV_PREFIXES = {
    "HF_": "owned by the collection's Hugging Face settings (hf_endpoint, hf_disable_xet, "
    "sglang_hf_token, weight staging)",
}
# Variables of the roles' own (not cluster variables) that name a URL when the inventory sets
# them; their defaults come from the profile, which is checked as sglang_engine.
URL_VARS = {
    "model_weights_hf_endpoint": "remove it to use the profile's hf_endpoint",
}
# The collection's variable prefixes. An inventory variable with one of them that no role
# declares (meta/argument_specs.yml) is read by nothing: a typo (roce_mut), or the name of
# another version; it is refused, not silently ignored.
PREFIXES = ("spark_", "roce_", "sglang_", "model_weights_", "watchdog_", "canary_")
# Argument-spec entry points whose options are not variables.
NOT_VARIABLES = {("sglang", "profile")}  # profile fields, set in sglang_profile_overrides
DSV4_SPECULATIVE = ("EAGLE", "DSPARK")
IFNAME_RE = re.compile(r"^[A-Za-z0-9_.:@-]{1,15}$")
# How the kernel names an RDMA device (rdma link show: rocep1s0f0, roceP2p1s0f0, mlx5_0) and a
# network interface (ip -br link: enp1s0f0np0, enP2p1s0f0np0, eth0): a name of the one kind
# where the other is asked for is a swap, whatever else it looks like.
HCA_NAME_RE = re.compile(r"^(roce|mlx[0-9]+_|irdma|bnxt_re|rxe|siw|efa|qedr|hns_)")
NETDEV_NAME_RE = re.compile(r"^(en|eth|wl|ww|bond|br-|vlan|team)")
NAME_HINT = (
    "rdma link show lists each HCA with its netdev (link rocep1s0f0/1 ... netdev enp1s0f0np0)"
)
# Revisions written as reminders, not pins (an example inventory's own text).
PLACEHOLDER_RE = re.compile(
    r"^(todo|tbd|fixme|changeme|change_me|none|null|unset|pin.?me|x+|0+)$|[<>{}]",
    re.IGNORECASE,
)
HEX_RE = re.compile(r"^[0-9a-f]+$")
DIGEST_RE = re.compile(r"@sha256:([0-9a-f]*)$")
MIN_ROCE_MTU = 9000
MAX_ROCE_MTU = 9978  # ConnectX-7 port maximum
RESERVED_PORTS = {22: "sshd"}


class Report:
    """Errors (launch refused) and warnings (operator told loudly)."""

    def __init__(self):
        self.errors = []
        self.warnings = []

    def error(self, host, variable, problem, fix):
        self.errors.append(f"{host}: {variable} {problem}; fix: {fix}")

    def warn(self, host, variable, problem, advice):
        self.warnings.append(f"{host}: {variable} {problem}; {advice}")


def _ipv4(value):
    try:
        return ipaddress.IPv4Address(str(value))
    except (ipaddress.AddressValueError, ValueError):
        return None


def _network(value):
    try:
        return ipaddress.IPv4Network(str(value), strict=True)
    except (ipaddress.AddressValueError, ipaddress.NetmaskValueError, ValueError):
        return None


def _rank(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def _check_ranks(nodes, report):
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
        rank = _rank(raw)
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


def _check_consistent(nodes, report):
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


def _check_addresses(nodes, report):
    mgmt_subnet = (
        _network(nodes[0].get("spark_mgmt_subnet")) if nodes[0].get("spark_mgmt_subnet") else None
    )
    if nodes[0].get("spark_mgmt_subnet") and mgmt_subnet is None:
        report.error(
            nodes[0]["host"],
            "spark_mgmt_subnet",
            f"{nodes[0].get('spark_mgmt_subnet')!r} is not an IPv4 network",
            "write it as a.b.c.0/24",
        )
    roce_subnet = _network(nodes[0].get("roce_subnet"))
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
            addr = _ipv4(raw)
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


def _check_nics(nodes, report):
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


def _name_kind_problem(var, value, want):
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
    iface_bad = _name_kind_problem("roce_iface", iface, "netdev")
    hca_bad = _name_kind_problem("roce_hca", hca, "hca")
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
        problem = _name_kind_problem(var, node.get(var), "netdev")
        if problem:
            report.error(host, var, problem, f"name the network interface ({NAME_HINT})")


def _check_control_paths(node, report):
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


FUNCTION_KEYS = ("hca", "iface", "ipv4", "subnet")
PRIMARY_VARS = {
    "hca": "roce_hca",
    "iface": "roce_iface",
    "ipv4": "roce_ipv4",
    "subnet": "roce_subnet",
}


def _check_functions(nodes, report):
    """roce_hcas: every data-plane function of a node (both halves of a 200G port).

    Each entry names hca, iface, ipv4 and subnet; the first is the function the
    single-function variables name; names and addresses are distinct; each address is a
    host of its subnet; the subnets are one list on every node, disjoint from each other
    and from the management network; every address is used once in the cluster.
    """
    fix_shape = "list each function as {hca: ..., iface: ..., ipv4: ..., subnet: ...}"
    mgmt = _network(nodes[0].get("spark_mgmt_subnet"))
    subnets_of, seen = {}, {}
    for node in nodes:
        host, hcas = node["host"], node.get("roce_hcas")
        if hcas in (None, "", []):
            continue
        if not isinstance(hcas, list) or not all(isinstance(e, dict) for e in hcas):
            report.error(host, "roce_hcas", f"is {hcas!r}, not a list of mappings", fix_shape)
            continue
        good = True
        for n, entry in enumerate(hcas):
            missing = [k for k in FUNCTION_KEYS if not entry.get(k)]
            extra = sorted(set(entry) - set(FUNCTION_KEYS))
            if missing or extra:
                what = ", ".join(
                    ([f"lacks {', '.join(missing)}"] if missing else [])
                    + ([f"has unknown {', '.join(extra)}"] if extra else [])
                )
                report.error(host, "roce_hcas", f"entry {n + 1} {what}", fix_shape)
                good = False
        if not good:
            continue
        for key, var in PRIMARY_VARS.items():
            if str(hcas[0][key]) != str(node.get(var) or ""):
                report.error(
                    host,
                    "roce_hcas",
                    f"entry 1 has {key} {hcas[0][key]!r}, but {var} is {node.get(var)!r}",
                    f"the first entry is the function {var} names: make them agree",
                )
        nets = []
        for n, entry in enumerate(hcas):
            where = f"entry {n + 1}"
            iface_bad = _name_kind_problem("iface", entry["iface"], "netdev")
            hca_bad = _name_kind_problem("hca", entry["hca"], "hca")
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
            net, addr = _network(entry["subnet"]), _ipv4(entry["ipv4"])
            nets.append(net)
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
        subnets_of[host] = [str(e["subnet"]) for e in hcas]
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


def _check_roce(node, report):
    host = node["host"]
    mtu = _rank(node.get("roce_mtu"))
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


def _check_pin(host, var, value, report, override):
    """A pin that is set must be a full commit (an unset one: _check_weights)."""
    fix = f"set {override} to the full 40-character commit sha"
    if value is None or str(value).strip() == "":
        return
    text = str(value).strip()
    if PLACEHOLDER_RE.search(text):
        report.error(host, var, f"{text!r} is a placeholder, not a revision", fix)
        return
    if COMMIT_RE.match(text):
        return
    if "…" in text or text.endswith("..."):
        report.error(host, var, f"{text!r} is truncated", fix)
    elif HEX_RE.match(text.lower()) and len(text) < 40:
        report.error(host, var, f"{text!r} looks like a truncated commit", fix)
    elif HEX_RE.match(text.lower()):
        report.error(host, var, f"{text!r} is not a 40-character lowercase commit sha", fix)
    else:
        report.error(
            host,
            var,
            f"{text!r} is not a commit but a branch or tag name, which moves",
            f"{fix} it points at now",
        )


def url_problem(value):
    """Why ``value`` is not an http(s) URL with a host (None when it is one)."""
    text = str(value)
    try:
        parts = urlsplit(text)
    except ValueError as exc:
        return f"{text!r} is not a URL ({exc})"
    if parts.scheme not in ("http", "https"):
        return f"{text!r} is not an http(s) URL" + ("" if parts.scheme else " (it has no scheme)")
    if not parts.hostname:
        return f"{text!r} names no host"
    return None


def _check_weights(host, engine, report):
    """What the weights stage refuses from the profile alone (its plan), before any node.

    An unset pin is refused here; a pin that is set but wrong is _check_pin's (its fix names
    the override), so the plan's own words for it are not repeated.
    """
    spec = engine.get("speculative") or {}
    pins = {
        "sglang_engine.model_revision": engine.get("model_revision"),
        "sglang_engine.speculative.draft_model_revision": spec.get("draft_model_revision"),
    }
    for error in weights_plan(engine)["errors"]:
        var = error.split(" ", 1)[0]
        if var in pins and str(pins[var] or "").strip():
            continue
        report.errors.append(f"{host}: {error}")


def _check_secrets(nodes, engine, hf_token_set, report):
    """The Hugging Face token goes only to huggingface.co or an endpoint the inventory trusts.

    Not an error: the token is then withheld (public repos need none). The warning names the
    endpoint and the variable, so a gated repo's 401 is no surprise.
    """
    first = nodes[0]
    trusted = first.get("sglang_hf_token_endpoints")
    if trusted in (None, ""):
        trusted = []
    if not isinstance(trusted, list):
        report.error(
            "cluster",
            "sglang_hf_token_endpoints",
            f"is {trusted!r}, not a list of URLs",
            "list the mirrors the token may go to, e.g. [https://hf.mirror.example.org]",
        )
        return
    for url in trusted:
        if url_problem(url):
            report.error(
                "cluster",
                "sglang_hf_token_endpoints",
                f"entry {url_problem(url)}",
                "give each trusted mirror as scheme://host[:port]",
            )
    if not hf_token_set:
        return
    endpoints = {}
    for node in nodes:
        endpoint = node.get("model_weights_hf_endpoint") or engine.get("hf_endpoint")
        if endpoint and not url_problem(endpoint) and not hf_token_sent(endpoint, trusted):
            endpoints.setdefault(str(endpoint), []).append(node["host"])
    for endpoint, hosts in endpoints.items():
        report.warn(
            ", ".join(hosts) if len(hosts) < len(nodes) else "cluster",
            "sglang_hf_token",
            f"is set but will NOT be sent to {endpoint} (not huggingface.co and not listed in "
            "sglang_hf_token_endpoints)",
            "public repos need no token; for a gated repo list that mirror in "
            f"sglang_hf_token_endpoints: [{endpoint}] if you trust it with the token, or set "
            "sglang_profile_overrides.hf_endpoint: https://huggingface.co",
        )


def _check_data_dir(host, engine, report):
    data_dir = engine.get("data_dir")
    if data_dir in (None, "") or posixpath.isabs(str(data_dir)):
        return
    report.error(
        host,
        "sglang_engine.data_dir",
        f"{data_dir!r} is a relative path (every host path of the profile, weights, caches "
        "and chat template, is built on it)",
        "set sglang_profile_overrides.data_dir to an absolute path, e.g. /srv/sparkfleet",
    )


def _check_engine(host, engine, node_count, api_key_set, report):
    var = "sglang_engine"
    image = str(engine.get("image") or "")
    digest = DIGEST_RE.search(image)
    if not image:
        report.error(
            host,
            f"{var}.image",
            "is empty",
            "set sglang_profile_overrides.image to the pinned image",
        )
    elif digest and len(digest.group(1)) != 64:
        report.error(
            host,
            f"{var}.image",
            f"{image!r} carries a truncated digest",
            "set sglang_profile_overrides.image to name@sha256:<64 hex digits>",
        )
    elif not digest and ":" not in image.rsplit("/", 1)[-1]:
        report.error(
            host,
            f"{var}.image",
            f"{image!r} has no tag or digest",
            "pin it (name:tag or name@sha256:...)",
        )
    _check_pin(
        host,
        f"{var}.model_revision",
        engine.get("model_revision"),
        report,
        "sglang_profile_overrides.model_revision",
    )
    spec = engine.get("speculative") or {}
    _check_pin(
        host,
        f"{var}.speculative.draft_model_revision",
        spec.get("draft_model_revision"),
        report,
        "sglang_profile_overrides.speculative.draft_model_revision",
    )
    endpoint = engine.get("hf_endpoint")
    if endpoint not in (None, "") and url_problem(endpoint):
        report.error(
            host,
            f"{var}.hf_endpoint",
            url_problem(endpoint),
            "set sglang_profile_overrides.hf_endpoint to the mirror's URL, e.g. "
            "https://hf-mirror.com",
        )
    _check_data_dir(host, engine, report)

    for field in ("model_path", "served_model_name", "container_name"):
        if not engine.get(field):
            report.error(
                host, f"{var}.{field}", "is empty", f"set sglang_profile_overrides.{field}"
            )

    nnodes = _rank(engine.get("nnodes"))
    tp = _rank(engine.get("tp_size"))
    pp = _rank(engine.get("pp_size")) or 1
    gpus = _rank(engine.get("__gpus_per_node")) or 1
    if nnodes != node_count:
        need = node_count * gpus
        # Settings that must change together are named in one message.
        together = (
            f" and, with it, tp_size x pp_size to {need} (now {tp * pp}, e.g. tp_size: {need})"
            if tp and tp * pp != need
            else ""
        )
        report.error(
            host,
            f"{var}.nnodes",
            f"is {engine.get('nnodes')} but spark_nodes has {node_count} nodes",
            f"set sglang_profile_overrides.nnodes to {node_count}{together}, or fix the inventory",
        )
    if tp is None or tp < 1:
        report.error(
            host,
            f"{var}.tp_size",
            f"is {engine.get('tp_size')!r}",
            "set a positive tensor-parallel size",
        )
    elif nnodes == node_count and tp * pp != nnodes * gpus:
        report.error(
            host,
            f"{var}.tp_size",
            f"x pp_size = {tp * pp}, but {nnodes} nodes x {gpus} GPU = {nnodes * gpus}",
            "tp_size x pp_size must use every GPU of the cluster exactly once",
        )

    port, dist_port = _rank(engine.get("port")), _rank(engine.get("dist_init_port"))
    for field, value in (("port", port), ("dist_init_port", dist_port)):
        if value is None or not 1 <= value <= 65535:
            report.error(
                host, f"{var}.{field}", f"is {engine.get(field)!r}", "use a TCP port 1..65535"
            )
        elif value in RESERVED_PORTS:
            report.error(
                host,
                f"{var}.{field}",
                f"is {value}, used by {RESERVED_PORTS[value]}",
                "pick a free port",
            )
    if port is not None and port == dist_port:
        report.error(
            host,
            f"{var}.dist_init_port",
            f"{dist_port} clashes with the API port",
            "the rendezvous needs its own port (seed: API 8081, rendezvous 23000)",
        )

    extra = [str(a) for a in engine.get("extra_args") or []]
    owned = owned_flags()
    for arg in extra:
        flag = arg.split("=", 1)[0]
        if flag in owned:
            report.error(
                host,
                f"{var}.extra_args",
                f"contains {flag}",
                f"remove it: it is {owned[flag]}",
            )

    env = engine.get("env") or {}
    if not isinstance(env, dict):
        report.error(host, f"{var}.env", f"is {env!r}, not a mapping", "write env as KEY: value")
        env = {}
    for key in sorted(env):
        owner = owned_env_key(key)
        if owner:
            report.error(
                host,
                f"{var}.env",
                f"sets {key}, which the collection owns",
                f"remove it from sglang_profile_overrides.env (or the preset): it is {owner}",
            )

    algorithm = spec.get("algorithm")
    if engine.get("family") == "deepseek_v4" and algorithm and algorithm not in DSV4_SPECULATIVE:
        report.error(
            host,
            f"{var}.speculative.algorithm",
            f"is {algorithm}, which DeepSeek-V4 does not accept",
            "use EAGLE (what 'MTP'/NextN means for DSV4) or DSPARK, or none",
        )
    window = speculative_window(engine)
    clamped = any("max_tokens_clamp" in (p.get("apply") or []) for p in engine.get("patches") or [])
    floor = _rank(engine.get("min_new_tokens")) or 0
    if window and not clamped:
        report.error(
            host,
            f"{var}.patches",
            f"lack max_tokens_clamp while {algorithm} takes {window} tokens per step",
            "keep the clamp: a max_tokens <= the draft window wedges every rank (seed Pitfall 3)",
        )
    elif window and floor <= window:
        report.error(
            host,
            f"{var}.min_new_tokens",
            f"{floor} does not exceed the speculative window ({window} tokens)",
            f"raise it above {window} (the seed uses 16 for 8 draft tokens)",
        )

    for field in ("watchdog_timeout", "health_timeout_s"):
        value = _rank(engine.get(field))
        if value is None or value < 1:
            report.error(
                host,
                f"{var}.{field}",
                f"is {engine.get(field)!r}",
                "use a positive number of seconds",
            )

    listen = str(engine.get("host") or "")
    if listen and not _loopback(listen) and not api_key_set:
        report.warn(
            host,
            "sglang_api_key",
            f"is empty while the API listens on {listen}:{engine.get('port')}",
            "ANYONE ON THAT NETWORK CAN USE THE MODEL; "
            "set a vaulted sglang_api_key or bind 127.0.0.1",
        )


def _check_url_vars(nodes, report):
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


def declared_variables(specs):
    """Variable name -> roles declaring it, from ``{role: argument_specs}`` (all entry points)."""
    declared = {}
    for role, entry_points in sorted(specs.items()):
        for entry, spec in (entry_points or {}).items():
            if (role, entry) in NOT_VARIABLES:
                continue
            for name in (spec or {}).get("options") or {}:
                declared.setdefault(name, []).append(role)
    return declared


def read_declared_variables(roles_dir, load):
    """declared_variables of every role under ``roles_dir``; ``load(path)`` parses YAML."""
    specs = {}
    for role in sorted(os.listdir(roles_dir)) if os.path.isdir(roles_dir) else ():
        path = os.path.join(roles_dir, role, "meta", "argument_specs.yml")
        if os.path.isfile(path):
            specs[role] = (load(path) or {}).get("argument_specs") or {}
    return declared_variables(specs)


def unknown_variables(names_by_host, declared):
    """One line per variable with a collection prefix that no role declares.

    ``names_by_host``: host -> the variable names its inventory (and extra vars) set.
    Hosts that set the same unknown variable are named together.
    """
    hosts_of = {}
    for host, names in names_by_host.items():
        for name in names:
            if str(name).startswith(PREFIXES) and name not in declared:
                hosts_of.setdefault(name, []).append(host)
    report = Report()
    for name in sorted(hosts_of):
        near = nearest(name, [d for d in declared if d.startswith(PREFIXES)])
        hint = f" (did you mean {near}?)" if near else ""
        fix = (
            f"rename it to {near}"
            if near
            else "correct or remove it; each role's variables: "
            "ansible-doc -t role sparkfleet.serving.<role>"
        )
        report.error(
            ", ".join(hosts_of[name]),
            name,
            f"is not a variable of any role of sparkfleet.serving{hint}, so nothing reads it",
            fix,
        )
    return report.errors


def no_nodes_error(group, sources, groups, unparsed=()):
    """The refusal of an inventory whose ``group`` has no host, with how it was read.

    ``sources``: the inventory sources given (ansible_inventory_sources); ``groups``: group
    -> hosts as Ansible read them; ``unparsed``: (path, reason) of source files that do not
    parse (Ansible only warns about them and goes on with what it could read).
    """

    def shown(source):
        source = str(source)
        if os.path.exists(source) or "," in source:
            return source
        return f"{source} (which does not exist)"

    read = ", ".join(shown(s) for s in sources) or "no source"
    found = [
        f"{name} ({', '.join(hosts)})" if hosts else f"{name} (empty)"
        for name, hosts in sorted(groups.items())
        if name not in ("all", "ungrouped") and name != group
    ]
    if groups.get("ungrouped"):
        found.append(f"hosts in no group ({', '.join(groups['ungrouped'])})")
    problem = f"has no hosts in the inventory read from {read}"
    problem += f"; groups found: {'; '.join(found)}" if found else "; it has no hosts at all"
    if unparsed:
        problem += "; Ansible could not parse " + "; ".join(f"{p}: {why}" for p, why in unparsed)
        fix = (
            f"correct {', '.join(path for path, _why in unparsed)} (ansible-inventory -i "
            f"{sources[0] if sources else '<inventory>'} --graph shows what Ansible reads)"
        )
    elif any(not os.path.exists(str(s)) and "," not in str(s) for s in sources) or not sources:
        fix = f"name the cluster's folder: -i inventory/<cluster> (its hosts.yml lists {group})"
    else:
        near = nearest(group, [n for n in groups if n not in ("all", "ungrouped", group)])
        fix = (
            f"rename the group {near} to {group}"
            if near
            else f"list the Sparks under {group}: hosts: in hosts.yml"
        )
    return f"cluster: {group} {problem}; fix: {fix}"


def owned_env_key(key):
    """What sets ``key`` when the collection owns it, else None."""
    key = str(key)
    if key in OWNED_ENV:
        return OWNED_ENV[key]
    for prefix, owner in OWNED_ENV_PREFIXES.items():
        if key.startswith(prefix):
            return owner
    return None


def _loopback(host):
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


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
    ranks = _check_ranks(nodes, report)
    _check_consistent(nodes, report)
    _check_addresses(nodes, report)
    _check_nics(nodes, report)
    _check_functions(nodes, report)
    _check_roce(nodes[0], report)
    _check_control_paths(nodes[0], report)
    _check_url_vars(nodes, report)
    head = next((h for h, r in ranks.items() if r == 0), nodes[0]["host"])
    _check_engine(head, engine or {}, len(nodes), api_key_set, report)
    if weights:
        _check_weights(head, engine or {}, report)
    _check_secrets(nodes, engine or {}, hf_token_set, report)
    return report.errors, report.warnings, ranks


# The playbooks whose offline checks preflight runs (preflight_playbook): each is refused here,
# before it connects to a node, for what its own run variables (extra vars) lack; validate.yml
# -e preflight_playbook=<name> runs the same. The variables each one reads.
PLAYBOOK_VARS = {
    "site": (),
    "restart": (),
    "status": (),
    "verify": (),
    "bench": (),
    "rollback": (),
    "canary": (),
    "stop": (),
    "upgrade": ("upgrade_image", "upgrade_max_slowdown"),
    "drill": ("drill_confirm", "drill_cleanup_only"),
    "monitoring": ("monitoring_prometheus_host",),
    "teardown": ("teardown_confirm", "teardown_weights"),
}
RUN = "ansible-playbook sparkfleet.serving.{} -i <inventory>"


def _truthy(value):
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def run_problems(playbook, run, cluster):
    """What ``playbook`` refuses offline from its run variables ``run`` (name -> value).

    A variable the run does not set is absent from ``run``. Lines as check_cluster's.
    """
    if playbook not in PLAYBOOK_VARS:
        return [
            f"cluster: preflight_playbook is {playbook!r}, not a playbook of the collection; "
            f"fix: one of {', '.join(sorted(PLAYBOOK_VARS))}"
        ]
    out = []
    if playbook == "upgrade":
        problems = upgrade_offline_problems(
            run.get("upgrade_image"), run.get("upgrade_max_slowdown", 0.05)
        )
        out += [f"cluster: {p}" for p in problems]
    elif playbook == "drill" and not _truthy(run.get("drill_cleanup_only", False)):
        refused = confirm_problem(
            "drills inject faults into", "drill_confirm", run.get("drill_confirm"), cluster
        )
        out += [f"cluster: {refused}"] if refused else []
    elif playbook == "teardown":
        weights = "too" if _truthy(run.get("teardown_weights", False)) else "stay"
        refused = confirm_problem(
            "teardown stops and removes what sparkfleet.serving installed "
            f"(the weights {weights}) on",
            "teardown_confirm",
            run.get("teardown_confirm"),
            cluster,
        )
        out += [f"cluster: {refused}; no node was contacted"] if refused else []
    elif playbook == "monitoring" and not str(run.get("monitoring_prometheus_host") or ""):
        out.append(
            "cluster: monitoring_prometheus_host is not set, so there is no host to write the "
            "scrape targets and alert rules on (the files would land on this controller); fix: "
            "set it in group_vars (the inventory host that runs Prometheus, or localhost only "
            "if it runs on this controller), or pass -e monitoring_prometheus_host=<host>"
        )
    return out


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
