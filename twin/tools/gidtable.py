#!/usr/bin/env python3
"""Write a sysfs-shaped RoCE GID table for a simulated Spark node.

The kernel of the test machines has no RDMA, so the twin keeps, per node, a tree
shaped like /sys/class/infiniband that holds what a ConnectX-7 port would show:

    <root>/<hca>/ports/<port>/gids/<i>            GID, 8 groups of 4 hex digits
    <root>/<hca>/ports/<port>/gid_attrs/types/<i> "IB/RoCE v1" or "RoCE v2"
    <root>/<hca>/ports/<port>/gid_attrs/ndevs/<i> the netdev the GID belongs to

Each address produces two consecutive entries, v1 then v2, as mlx5 does. Empty
slots hold the zero GID and no type/ndev file (reading them fails, like EINVAL
on real sysfs). The order of the entries is the layout, chosen per node, so the
RoCE v2 index of the data-plane address can differ between nodes (seed: 7 on
ranks 0-1, 5 on ranks 2-3).

Layout items (comma separated), each one pair of slots:
    link-local      fe80::/64 address derived from the netdev's MAC
    ipv4:A.B.C.D    IPv4-mapped GID ::ffff:A.B.C.D
    ipv6:ADDR       a global IPv6 GID
    empty           two empty slots
    addrs           every IPv4 currently on the netdev, in kernel order

With --present-only an ipv4 item whose address is not on the netdev becomes an
empty pair, as the kernel keeps no GID for an address that is not configured;
sparksim-init re-runs it whenever the NIC's addresses change. The layout used is
saved beside the table (<root>/.<hca>.layout); --prefer-saved reuses it, so a
layout changed later (a simulated NIC swap) survives address changes.

The table is replaced atomically (built beside the target, then renamed).
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import shutil
import subprocess
import sys
import tempfile

ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"


def gid_text(address):
    """sysfs spelling of the GID for an IPv4 or IPv6 address."""
    ip = ipaddress.ip_address(address)
    if ip.version == 4:
        ip = ipaddress.IPv6Address("::ffff:" + str(ip))
    packed = ip.packed.hex()
    return ":".join(packed[i : i + 4] for i in range(0, 32, 4))


def link_local(mac):
    """EUI-64 link-local address for a MAC (as the kernel derives it)."""
    octets = [int(part, 16) for part in mac.split(":")]
    octets[0] ^= 0x02
    eui = [*octets[:3], 0xFF, 0xFE, *octets[3:]]
    groups = [f"{eui[i] << 8 | eui[i + 1]:x}" for i in range(0, 8, 2)]
    return "fe80::" + ":".join(groups)


def netdev_info(netdev):
    """(mac, [ipv4...]) of a netdev, read with `ip -j addr`."""
    out = subprocess.run(
        ["ip", "-j", "addr", "show", "dev", netdev],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    info = json.loads(out)[0]
    ipv4 = [a["local"] for a in info.get("addr_info", []) if a.get("family") == "inet"]
    return info.get("address", "00:00:00:00:00:00"), ipv4


def expand(layout, netdev, mac=None, ipv4=None, present_only=False):
    """Layout items -> list of addresses (None for an empty pair)."""
    if mac is None or ipv4 is None:
        mac, ipv4 = netdev_info(netdev)
    out = []
    for item in filter(None, (x.strip() for x in layout.split(","))):
        if item == "link-local":
            out.append(link_local(mac))
        elif item == "empty":
            out.append(None)
        elif item == "addrs":
            out.extend(ipv4)
        elif item.startswith("ipv4:") and present_only and item[5:] not in ipv4:
            out.append(None)
        elif item.startswith(("ipv4:", "ipv6:")):
            out.append(item.split(":", 1)[1])
        else:
            raise ValueError(f"unknown layout item {item!r}")
    return out


def write_table(root, hca, port, netdev, addresses, slots):
    """Build the tree for one HCA port in a temporary dir and swap it in."""
    if 2 * len(addresses) > slots:
        raise ValueError(
            f"{len(addresses)} addresses need {2 * len(addresses)} slots, have {slots}"
        )
    os.makedirs(root, exist_ok=True)
    final = os.path.join(root, hca)
    tmp = tempfile.mkdtemp(prefix=f".{hca}.", dir=root)
    base = os.path.join(tmp, "ports", str(port))
    for sub in ("gids", "gid_attrs/types", "gid_attrs/ndevs"):
        os.makedirs(os.path.join(base, sub))
    entries = []
    for address in addresses:
        entries += [(address, "IB/RoCE v1"), (address, "RoCE v2")]
    for index in range(slots):
        address, kind = entries[index] if index < len(entries) else (None, None)
        with open(os.path.join(base, "gids", str(index)), "w", encoding="ascii") as handle:
            handle.write((gid_text(address) if address else ZERO_GID) + "\n")
        if address:
            with open(
                os.path.join(base, "gid_attrs/types", str(index)), "w", encoding="ascii"
            ) as h:
                h.write(kind + "\n")
            with open(
                os.path.join(base, "gid_attrs/ndevs", str(index)), "w", encoding="ascii"
            ) as h:
                h.write(netdev + "\n")
    os.chmod(tmp, 0o755)
    if os.path.exists(final):
        old = final + ".old"
        shutil.rmtree(old, ignore_errors=True)
        os.rename(final, old)
        os.rename(tmp, final)
        shutil.rmtree(old)
    else:
        os.rename(tmp, final)
    return entries


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--root", required=True, help="table root, e.g. /opt/sparksim/sys/class/infiniband"
    )
    parser.add_argument("--hca", required=True)
    parser.add_argument("--port", type=int, default=1)
    parser.add_argument("--netdev", required=True)
    parser.add_argument("--layout", default="link-local,addrs")
    parser.add_argument("--slots", type=int, default=16)
    parser.add_argument("--present-only", action="store_true", help="skip IPv4s not on the netdev")
    parser.add_argument("--prefer-saved", action="store_true", help="reuse the layout last written")
    args = parser.parse_args(argv)
    saved = os.path.join(args.root, f".{args.hca}.layout")
    layout = args.layout
    if args.prefer_saved and os.path.exists(saved):
        with open(saved, encoding="ascii") as handle:
            layout = handle.read().strip() or layout
    addresses = expand(layout, args.netdev, present_only=args.present_only)
    entries = write_table(args.root, args.hca, args.port, args.netdev, addresses, args.slots)
    with open(saved + ".tmp", "w", encoding="ascii") as handle:
        handle.write(layout + "\n")
    os.replace(saved + ".tmp", saved)
    for index, (address, kind) in enumerate(entries):
        if address:  # empty slots hold the zero GID, which show_gids does not print
            gid = gid_text(address)
            print(f"{args.hca}\t{args.port}\t{index}\t{gid}\t{address}\t{kind}\t{args.netdev}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
