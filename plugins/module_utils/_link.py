# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Live state of one NIC (from ``ip -j addr show dev X``) and the plan to fix it."""

from __future__ import annotations

import ipaddress
import json


class LinkError(Exception):
    """The NIC is missing or ``ip`` printed something unexpected."""


def parse_ip_addr(text, name):
    """``ip -j addr show dev <name>`` output -> {name, mtu, up, ipv4: [cidr...]}."""
    try:
        data = json.loads(text or "[]")
    except ValueError as exc:
        raise LinkError(f"{name}: cannot parse `ip -j addr` output: {exc}") from exc
    for link in data:
        if link.get("ifname") != name:
            continue
        ipv4 = [
            f"{a['local']}/{a['prefixlen']}"
            for a in link.get("addr_info", [])
            if a.get("family") == "inet" and "local" in a
        ]
        flags = link.get("flags") or []
        return {
            "name": name,
            "mtu": int(link.get("mtu", 0)),
            "up": "UP" in flags,
            "ipv4": ipv4,
        }
    raise LinkError(f"{name}: no such network interface")


def normalize_cidr(value):
    """'10.0.30.1/24' stays; a bare address is refused (the prefix matters)."""
    iface = ipaddress.IPv4Interface(str(value))
    if "/" not in str(value):
        raise LinkError(f"{value}: give the address with its prefix length, e.g. {value}/24")
    return f"{iface.ip}/{iface.network.prefixlen}"


def plan(current, mtu=None, addresses=(), up=True, absent=()):
    """Commands (argv tails for ``ip``) that bring ``current`` to the wanted state.

    Addresses already present (same address and prefix) are kept; an address is removed
    only when ``absent`` names it (address and prefix), never otherwise: a NIC may carry
    addresses this collection does not own.
    """
    name = current["name"]
    steps = []
    gone = [normalize_cidr(cidr) for cidr in absent]
    both = sorted(set(gone) & {normalize_cidr(cidr) for cidr in addresses})
    if both:
        raise LinkError(
            f"{name}: {', '.join(both)} is both wanted and absent; name it in one of the two"
        )
    if mtu is not None and current["mtu"] != int(mtu):
        steps.append(["link", "set", "dev", name, "mtu", str(int(mtu))])
    have = set(current["ipv4"])
    have_ips = {c.split("/")[0]: c for c in current["ipv4"]}
    for cidr in addresses:
        cidr = normalize_cidr(cidr)
        if cidr in have:
            continue
        ip = cidr.split("/")[0]
        if ip in have_ips:
            raise LinkError(
                f"{name}: {ip} is configured as {have_ips[ip]}, not {cidr}; "
                "fix the prefix in the inventory (roce_subnet) or on the node"
            )
        steps.append(["addr", "add", cidr, "dev", name])
    for cidr in gone:
        if cidr in have:
            steps.append(["addr", "del", cidr, "dev", name])
    if up and not current["up"]:
        steps.append(["link", "set", "dev", name, "up"])
    return steps


def predict(current, steps):
    """The state ``current`` will have after ``steps``."""
    after = {
        "name": current["name"],
        "mtu": current["mtu"],
        "up": current["up"],
        "ipv4": list(current["ipv4"]),
    }
    for step in steps:
        if step[:2] == ["link", "set"] and "mtu" in step:
            after["mtu"] = int(step[-1])
        elif step[:2] == ["addr", "add"]:
            after["ipv4"].append(step[2])
        elif step[:2] == ["addr", "del"]:
            after["ipv4"].remove(step[2])
        elif step[:2] == ["link", "set"] and step[-1] == "up":
            after["up"] = True
    return after
