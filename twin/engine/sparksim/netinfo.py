"""What NCCL reads from a node: its interfaces and the RoCE GID table.

Interfaces come from ``ip -j addr`` (kernel order, like getifaddrs). GID tables
are sysfs-shaped trees (``<root>/<hca>/ports/<port>/gids/<i>`` plus
``gid_attrs/types/<i>`` and ``gid_attrs/ndevs/<i>``), written for the twin by
twin/tools/gidtable.py.
"""

from __future__ import annotations

import ipaddress
import json
import os
import socket
import subprocess

ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"
ROCE_TYPES = {1: "IB/RoCE v1", 2: "RoCE v2"}


class NetError(Exception):
    """A condition under which NCCL would fail; the message is NCCL WARN text."""


def interfaces():
    """[(ifname, [ipv4, ...]), ...] in kernel order, addresses in kernel order."""
    out = subprocess.run(
        ["ip", "-j", "addr", "show"], check=True, capture_output=True, text=True
    ).stdout
    result = []
    for link in json.loads(out or "[]"):
        addrs = [a["local"] for a in link.get("addr_info", []) if a.get("family") == "inet"]
        result.append((link["ifname"], addrs))
    return result


def _match_ifname(spec, names):
    """NCCL_SOCKET_IFNAME semantics: prefixes, '=' exact, '^' exclusion."""
    spec = spec or ""
    exclude = spec.startswith("^")
    if exclude:
        spec = spec[1:]
    exact = spec.startswith("=")
    if exact:
        spec = spec[1:]
    wanted = [s for s in spec.split(",") if s]

    def hit(name):
        return any(name == w if exact else name.startswith(w) for w in wanted)

    return [n for n in names if (not hit(n)) == exclude] if wanted else list(names)


def socket_address(ifname_spec, links=None):
    """(ifname, ipv4) NCCL's bootstrap would use: the first IPv4 of the first match."""
    links = interfaces() if links is None else links
    names = [name for name, addrs in links if addrs]
    if ifname_spec:
        candidates = _match_ifname(ifname_spec, names)
    else:
        # NCCL default: ib* first, then anything but docker* and lo.
        candidates = [n for n in names if n.startswith("ib")] or _match_ifname("^docker,lo", names)
    for name, addrs in links:
        if name in candidates:
            return name, addrs[0]
    shown = ", ".join(f"{n}:{a[0]}" for n, a in links if a) or "none"
    raise NetError(
        f"Bootstrap : no socket interface found (NCCL_SOCKET_IFNAME={ifname_spec or '<unset>'}; "
        f"interfaces with IPv4: {shown})"
    )


def first_ipv4(ifname, links=None):
    """The first IPv4 of ``ifname`` (exact name), as getifaddrs lists it; None if none."""
    links = interfaces() if links is None else links
    for name, addrs in links:
        if name == ifname and addrs:
            return addrs[0]
    return None


def _route_source_ipv4():
    """SGLang's get_local_ip_by_remote(): the source address of the default route."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.connect(("8.8.8.8", 80))  # nothing is sent
        return sock.getsockname()[0]
    except OSError:
        return None
    finally:
        sock.close()


def _hostname_ipv4():
    try:
        ip = socket.gethostbyname(socket.gethostname())
    except OSError:
        return None
    return ip if ip not in ("127.0.0.1", "0.0.0.0") else None


def sglang_host_ip(env, links=None):
    """(ip, how) SGLang's get_local_ip_auto() picks for its cross-node message queue.

    The order of the pinned release (srt/utils/common.py of 0.5.9, network.py of
    0.5.12): SGLANG_HOST_IP, then HOST_IP, then the first IPv4 of
    SGLANG_LOCAL_IP_NIC, then the source address of the default route, then the
    hostname's address.
    """
    for var in ("SGLANG_HOST_IP", "HOST_IP"):
        if env.get(var):
            return env[var], var
    nic = env.get("SGLANG_LOCAL_IP_NIC")
    if nic:
        ip = first_ipv4(nic, links)
        if ip:
            return ip, f"SGLANG_LOCAL_IP_NIC={nic}"
    ip = _route_source_ipv4()
    if ip:
        return ip, "the default route (no SGLANG_HOST_IP)"
    ip = _hostname_ipv4()
    if ip:
        return ip, "the hostname (no SGLANG_HOST_IP)"
    raise NetError("Can not get local ip")


def gloo_address(env, links=None):
    """(ip, how) torch's gloo group binds: first IPv4 of GLOO_SOCKET_IFNAME, else the hostname's."""
    ifname = env.get("GLOO_SOCKET_IFNAME")
    if ifname:
        ip = first_ipv4(ifname.split(",")[0], links)
        if not ip:
            raise NetError(f"[Gloo] GLOO_SOCKET_IFNAME={ifname}: no such interface with an IPv4")
        return ip, f"GLOO_SOCKET_IFNAME={ifname}"
    ip = _hostname_ipv4()
    if not ip:
        raise NetError("[Gloo] cannot resolve the hostname and GLOO_SOCKET_IFNAME is unset")
    return ip, "the hostname (no GLOO_SOCKET_IFNAME)"


def gid_text_to_ip(text):
    """ipaddress object of a sysfs GID (IPv4 for an IPv4-mapped GID)."""
    ip = ipaddress.IPv6Address(int(text.replace(":", ""), 16))
    return ip.ipv4_mapped or ip


def _read(path):
    try:
        with open(path, encoding="ascii") as handle:
            return handle.read().strip()
    except OSError:
        return None


def read_gids(root, hca, port=1):
    """Rows (index, gid_text, ip, type, netdev) of one port; empty slots omitted."""
    base = os.path.join(root, hca, "ports", str(port))
    gids_dir = os.path.join(base, "gids")
    if not os.path.isdir(gids_dir):
        raise NetError(f"NET/IB : No device found: {hca}:{port} has no GID table under {root}")
    rows = []
    for name in sorted((n for n in os.listdir(gids_dir) if n.isdigit()), key=int):
        text = _read(os.path.join(gids_dir, name))
        if not text or text == ZERO_GID:
            continue
        kind = _read(os.path.join(base, "gid_attrs", "types", name))
        ndev = _read(os.path.join(base, "gid_attrs", "ndevs", name))
        rows.append((int(name), text, gid_text_to_ip(text), kind, ndev))
    return rows


def parse_hcas(spec, root):
    """NCCL_IB_HCA -> [(hca, port)]; unset means every device under root."""
    spec = (spec or "").lstrip("=")
    if spec.startswith("^"):
        excluded = {s.split(":")[0] for s in spec[1:].split(",") if s}
        names = sorted(os.listdir(root)) if os.path.isdir(root) else []
        return [(n, 1) for n in names if n not in excluded and not n.startswith(".")]
    if spec:
        out = []
        for item in filter(None, spec.split(",")):
            name, _, port = item.partition(":")
            out.append((name, int(port) if port.isdigit() else 1))
        return out
    names = sorted(os.listdir(root)) if os.path.isdir(root) else []
    return [(n, 1) for n in names if not n.startswith(".")]


def select_gids(env, links=None):
    """Check or pick the RoCE GID of every device of NCCL_IB_HCA like NCCL (one
    NCCL_IB_GID_INDEX for all of them); return one dict per device, in order.

    env: mapping with NCCL_IB_HCA, NCCL_IB_GID_INDEX, NCCL_IB_ROCE_VERSION_NUM,
    NCCL_IB_ADDR_RANGE and SPARKSIM_SYSFS_ROOT. Raises NetError with NCCL-style text.
    """
    root = env.get("SPARKSIM_SYSFS_ROOT") or "/sys/class/infiniband"
    hcas = parse_hcas(env.get("NCCL_IB_HCA"), root)
    if not hcas:
        raise NetError(
            f"NET/IB : No device found under {root} (NCCL_IB_HCA={env.get('NCCL_IB_HCA')})"
        )
    links = interfaces() if links is None else links
    return [_select_one(env, root, hca, port, links) for hca, port in hcas]


def _select_one(env, root, hca, port, links):
    version = int(env.get("NCCL_IB_ROCE_VERSION_NUM") or 2)
    if version not in ROCE_TYPES:
        raise NetError(f"NET/IB : NCCL_IB_ROCE_VERSION_NUM={version} is not 1 or 2")
    want_type = ROCE_TYPES[version]
    addr_range = env.get("NCCL_IB_ADDR_RANGE") or None
    network = ipaddress.ip_network(addr_range, strict=False) if addr_range else None
    index_env = env.get("NCCL_IB_GID_INDEX")
    by_name = dict(links)
    dev = f"{hca}:{port}"
    rows = read_gids(root, hca, port)
    netdevs = []
    for row in rows:
        if row[4] and row[4] not in netdevs:
            netdevs.append(row[4])
    if not netdevs:
        raise NetError(f"NET/IB : {dev} has no GID with a netdev under {root}")
    netdev = netdevs[0]
    if netdev not in by_name:
        raise NetError(f"NET/IB : {dev} netdev {netdev} does not exist on this node")
    candidates = [ipaddress.ip_address(a) for a in by_name[netdev]]
    if network is not None:
        candidates = [a for a in candidates if a in network]
    if not candidates:
        raise NetError(
            f"NET/IB : {dev} netdev {netdev} has no IPv4 address"
            + (f" inside NCCL_IB_ADDR_RANGE={addr_range}" if addr_range else "")
            + f" (it has: {', '.join(by_name[netdev]) or 'none'})"
        )
    target = candidates[0]
    matches = [r for r in rows if r[2] == target and r[3] == want_type]
    expected = matches[0] if matches else None
    ipv4_rows = [r for r in rows if r[2].version == 4]

    def listing():
        return "; ".join(f"index {r[0]} {r[2]} ({r[3]}, {r[4]})" for r in ipv4_rows) or "none"

    if index_env not in (None, ""):
        try:
            index = int(index_env)
        except ValueError:
            raise NetError(f"NET/IB : NCCL_IB_GID_INDEX={index_env!r} is not an integer") from None
        row = next((r for r in rows if r[0] == index), None)
        where = f"index {expected[0]}" if expected else "not in the table"
        if row is None:
            raise NetError(
                f"NET/IB : {dev} GID index {index} is empty, not the {want_type} GID of "
                f"{target} ({where})"
            )
        if row[2] != target or row[3] != want_type:
            raise NetError(
                f"NET/IB : {dev} GID index {index} is {row[2]} ({row[3]}, {row[4]}), "
                f"not the {want_type} GID of {target} ({where})"
            )
        chosen, how = row, f"NCCL_IB_GID_INDEX={index}"
    else:
        if expected is None:
            raise NetError(
                f"NET/IB : {dev} has no {want_type} GID for {target}"
                + (f" inside NCCL_IB_ADDR_RANGE={addr_range}" if addr_range else "")
                + f"; IPv4 GIDs found: {listing()}"
            )
        chosen = expected
        how = "auto-selected" + (f" inside NCCL_IB_ADDR_RANGE={addr_range}" if addr_range else "")
    return {
        "hca": hca,
        "port": port,
        "dev": dev,
        "index": chosen[0],
        "gid": chosen[1],
        "ip": str(chosen[2]),
        "type": chosen[3],
        "netdev": chosen[4],
        "how": how,
    }
