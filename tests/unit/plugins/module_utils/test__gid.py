# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Tests for the pure GID table logic behind roce_gid_info."""

from __future__ import annotations

import importlib.util
import ipaddress
import os

import pytest

from ansible_collections.sparkfleet.serving.plugins.module_utils import _gid

MAC = "5c:25:73:4c:0a:1e"
LINK_LOCAL = "fe80::5e25:73ff:fe4c:a1e"
NETDEV = "enp1s0f0np0"
V1, V2 = "IB/RoCE v1", "RoCE v2"
UNREADABLE = object()  # a directory where the attribute file should be: open() raises OSError
ZERO = "0000:0000:0000:0000:0000:0000:0000:0000"


def gid(address):
    """sysfs spelling of the GID of an IPv4 or IPv6 address."""
    ip = ipaddress.ip_address(address)
    if ip.version == 4:
        ip = ipaddress.IPv6Address("::ffff:" + str(ip))
    packed = ip.packed.hex()
    return ":".join(packed[i : i + 4] for i in range(0, 32, 4))


def pair(address, netdev=NETDEV):
    """The two entries mlx5 creates per address: v1, then v2."""
    return [(gid(address), V1, netdev), (gid(address), V2, netdev)]


def _write(path, value):
    if value is None:
        return
    if value is UNREADABLE:
        os.makedirs(path)
        return
    with open(path, "w", encoding="ascii") as handle:
        handle.write(value + "\n")


def write_port(root, hca, port, entries, slots=16):
    """A sysfs-shaped GID table for one port; None entries are empty slots."""
    base = os.path.join(str(root), hca, "ports", str(port))
    for sub in ("gids", "gid_attrs/types", "gid_attrs/ndevs"):
        os.makedirs(os.path.join(base, sub), exist_ok=True)
    for index in range(max(slots, len(entries))):
        entry = entries[index] if index < len(entries) else None
        gid_text, kind, netdev = entry if entry else (ZERO, None, None)
        _write(os.path.join(base, "gids", str(index)), gid_text)
        _write(os.path.join(base, "gid_attrs/types", str(index)), kind)
        _write(os.path.join(base, "gid_attrs/ndevs", str(index)), netdev)


# Seed, Pitfall 2: ranks 0-1 carry the old 10.0.22.x cross-wire address on the RoCE
# NIC as well (Pitfall 1), so their v2 data-plane GID sits at 7; ranks 2-3 at 5.
SEED_RANK0 = {
    ("rocep1s0f0", 1): pair(LINK_LOCAL)
    + pair("10.0.22.3")
    + pair("2001:db8:30::1")
    + pair("10.0.30.1")
}
SEED_RANK2 = {("rocep1s0f0", 1): pair(LINK_LOCAL) + pair("2001:db8:30::3") + pair("10.0.30.3")}
TWIN_HCAS = {
    ("rocep1s0f0", 1): pair(LINK_LOCAL) + pair("10.0.30.1"),
    ("roceP2p1s0f0", 1): pair("fe80::5e25:73ff:fe4c:a1f", "enP2p1s0f0np0")
    + pair("10.0.31.1", "enP2p1s0f0np0"),
}
DUPLICATE_HCAS = {
    ("rocep1s0f0", 1): pair(LINK_LOCAL) + pair("10.0.30.1"),
    ("roceP2p1s0f0", 1): pair("fe80::5e25:73ff:fe4c:a1f", "enP2p1s0f0np0")
    + pair("10.0.30.1", "enP2p1s0f0np0"),
}
V1_ONLY = {
    ("rocep1s0f0", 1): [
        (gid(address), V1, NETDEV) for address in (LINK_LOCAL, "10.0.22.9", "10.0.30.9")
    ]
}
IPV6_FIRST = {
    ("rocep1s0f0", 1): pair(LINK_LOCAL)
    + pair("2001:db8:30::4")
    + pair("fd00:30::4")
    + pair("10.0.30.4")
}
VLAN = {
    ("rocep1s0f0", 1): pair(LINK_LOCAL)
    + pair("fe80::5e25:73ff:fe4c:a1e", "enp1s0f0np0.30")
    + pair("10.0.30.2", "enp1s0f0np0.30")
}
PREFIX = {("rocep1s0f0", 1): pair(LINK_LOCAL) + pair("10.0.30.10") + pair("10.0.30.1")}
ONLY_PREFIX = {("rocep1s0f0", 1): pair(LINK_LOCAL) + pair("10.0.30.10")}
STALE = {("rocep1s0f0", 1): pair(LINK_LOCAL) + pair("10.0.30.7")}
UNREADABLE_TYPE = {
    ("rocep1s0f0", 1): [
        *pair(LINK_LOCAL),
        (gid("10.0.30.1"), UNREADABLE, NETDEV),
        (gid("10.0.30.1"), V2, UNREADABLE),
    ]
}
HIGH_INDEX = {
    ("rocep1s0f0", 1): pair(LINK_LOCAL)
    + pair("10.0.22.1")
    + pair("10.0.23.1")
    + pair("10.0.24.1")
    + [None, None]
    + pair("10.0.30.1")
}
TWO_PORTS = {
    ("rocep1s0f0", 1): pair(LINK_LOCAL) + pair("10.0.22.1"),
    ("rocep1s0f0", 2): pair("fe80::5e25:73ff:fe4c:a1f", "enp1s0f1np1")
    + pair("10.0.30.1", "enp1s0f1np1"),
}
SAME_PORT_TWICE = {
    ("rocep1s0f0", 1): pair(LINK_LOCAL) + pair("10.0.30.1") + pair("10.0.30.1", "enp1s0f0np0.30")
}


def build(root, layout, slots=16):
    for (hca, port), entries in layout.items():
        write_port(root, hca, port, entries, slots)
    return str(root)


@pytest.mark.parametrize(
    ("layout", "address", "version", "hca", "expected"),
    [
        pytest.param(
            SEED_RANK0, "10.0.30.1", 2, None, ("rocep1s0f0", 1, 7, NETDEV), id="seed-rank0"
        ),
        pytest.param(SEED_RANK0, "10.0.30.1", 1, None, ("rocep1s0f0", 1, 6, NETDEV), id="seed-v1"),
        pytest.param(SEED_RANK0, "10.0.22.3", 2, None, ("rocep1s0f0", 1, 3, NETDEV), id="cross"),
        pytest.param(
            SEED_RANK2, "10.0.30.3", 2, None, ("rocep1s0f0", 1, 5, NETDEV), id="seed-rank2"
        ),
        pytest.param(TWIN_HCAS, "10.0.30.1", 2, None, ("rocep1s0f0", 1, 3, NETDEV), id="twin"),
        pytest.param(
            TWIN_HCAS,
            "10.0.31.1",
            2,
            "roceP2p1s0f0",
            ("roceP2p1s0f0", 1, 3, "enP2p1s0f0np0"),
            id="twin-filter",
        ),
        pytest.param(IPV6_FIRST, "10.0.30.4", 2, None, ("rocep1s0f0", 1, 7, NETDEV), id="ipv6"),
        pytest.param(VLAN, "10.0.30.2", 2, None, ("rocep1s0f0", 1, 5, "enp1s0f0np0.30"), id="vlan"),
        pytest.param(PREFIX, "10.0.30.1", 2, None, ("rocep1s0f0", 1, 5, NETDEV), id="not-.10"),
        pytest.param(PREFIX, "10.0.30.10", 2, None, ("rocep1s0f0", 1, 3, NETDEV), id="the-.10"),
        pytest.param(
            UNREADABLE_TYPE, "10.0.30.1", 2, None, ("rocep1s0f0", 1, 3, ""), id="unreadable"
        ),
        pytest.param(HIGH_INDEX, "10.0.30.1", 2, None, ("rocep1s0f0", 1, 11, NETDEV), id="idx11"),
        pytest.param(
            TWO_PORTS, "10.0.30.1", 2, None, ("rocep1s0f0", 2, 3, "enp1s0f1np1"), id="port2"
        ),
        pytest.param(
            DUPLICATE_HCAS,
            "10.0.30.1",
            2,
            "roceP2p1s0f0",
            ("roceP2p1s0f0", 1, 3, "enP2p1s0f0np0"),
            id="duplicate-filtered",
        ),
    ],
)
def test_select_finds(tmp_path, layout, address, version, hca, expected):
    rows = _gid.read_table(build(tmp_path, layout))
    row = _gid.select(rows, address, version, hca=hca)
    assert (row["hca"], row["port"], row["index"], row["netdev"]) == expected
    assert row["gid"] == gid(address)
    assert row["ipv4"] == address
    assert row["version"] == f"v{version}"


@pytest.mark.parametrize(
    ("layout", "address", "hca", "hcas", "expected"),
    [
        pytest.param(
            V1_ONLY,
            "10.0.30.9",
            None,
            None,
            "10.0.30.9: no RoCE v2 GID on rocep1s0f0; found v1 at rocep1s0f0 port 1 index 2"
            " (10.0.30.9, enp1s0f0np0); IPv4 GIDs present: v1 at rocep1s0f0 port 1 index 1"
            " (10.0.22.9, enp1s0f0np0), v1 at rocep1s0f0 port 1 index 2 (10.0.30.9, enp1s0f0np0)",
            id="v1-only",
        ),
        pytest.param(
            STALE,
            "10.0.30.1",
            None,
            None,
            "10.0.30.1: no RoCE v2 GID on rocep1s0f0; no GID carries 10.0.30.1 (is it configured"
            " on the RoCE netdev?); IPv4 GIDs present: v1 at rocep1s0f0 port 1 index 2"
            " (10.0.30.7, enp1s0f0np0), v2 at rocep1s0f0 port 1 index 3 (10.0.30.7, enp1s0f0np0)",
            id="stale",
        ),
        pytest.param(
            ONLY_PREFIX,
            "10.0.30.1",
            None,
            None,
            "10.0.30.1: no RoCE v2 GID on rocep1s0f0; no GID carries 10.0.30.1",
            id="only-.10",
        ),
        pytest.param(
            DUPLICATE_HCAS,
            "10.0.30.1",
            None,
            None,
            "10.0.30.1: 2 RoCE v2 GIDs match: roceP2p1s0f0 port 1 index 3 (enP2p1s0f0np0),"
            " rocep1s0f0 port 1 index 3 (enp1s0f0np0); set hca (inventory: roce_hca) to the HCA"
            " of the data-plane NIC",
            id="duplicate",
        ),
        pytest.param(
            SAME_PORT_TWICE,
            "10.0.30.1",
            None,
            None,
            "10.0.30.1: 2 RoCE v2 GIDs match: rocep1s0f0 port 1 index 3 (enp1s0f0np0),"
            " rocep1s0f0 port 1 index 5 (enp1s0f0np0.30); the address is assigned more than once",
            id="same-port-twice",
        ),
        pytest.param(
            TWIN_HCAS,
            "10.0.31.1",
            "rocep1s0f0",
            None,
            "10.0.31.1: no RoCE v2 GID on rocep1s0f0; no GID carries 10.0.31.1 (is it configured"
            " on the RoCE netdev?); v2 at roceP2p1s0f0 port 1 index 3 (10.0.31.1, enP2p1s0f0np0)"
            " is outside the hca filter rocep1s0f0; IPv4 GIDs present: v1 at rocep1s0f0",
            id="wrong-filter",
        ),
        pytest.param(
            TWIN_HCAS,
            "10.0.30.1",
            "mlx5_0",
            None,
            "10.0.30.1: hca mlx5_0 not found; HCAs present: roceP2p1s0f0, rocep1s0f0",
            id="unknown-hca",
        ),
        pytest.param(
            {("rocep1s0f0", 1): pair(LINK_LOCAL)},
            "10.0.30.1",
            "roceP2p1s0f0",
            ["roceP2p1s0f0", "rocep1s0f0"],
            "10.0.30.1: no RoCE v2 GID on roceP2p1s0f0; no GID carries 10.0.30.1 (is it"
            " configured on the RoCE netdev?); IPv4 GIDs present: none",
            id="hca-with-empty-table",
        ),
    ],
)
def test_select_fails(tmp_path, layout, address, hca, hcas, expected):
    rows = _gid.read_table(build(tmp_path, layout))
    with pytest.raises(_gid.GidSelectionError) as info:
        _gid.select(rows, address, 2, hca=hca, hcas=hcas)
    assert str(info.value).startswith(expected)


@pytest.mark.parametrize(
    ("address", "version", "message"),
    [
        ("10.0.30.256", 2, "address '10.0.30.256' is not an IPv4 address"),
        ("10.0.30.1/24", 2, "address '10.0.30.1/24' is not an IPv4 address"),
        ("2001:db8:30::1", 2, "address '2001:db8:30::1' is not an IPv4 address"),
        ("10.0.30.1", 3, "10.0.30.1: RoCE version 3 is not 1 or 2"),
    ],
)
def test_select_rejects_arguments(address, version, message):
    with pytest.raises(_gid.GidError, match="^" + message.replace(".", r"\.")):
        _gid.select([], address, version)


def test_read_table_seed_rows(tmp_path):
    rows = _gid.read_table(build(tmp_path, SEED_RANK0))
    assert [row["index"] for row in rows] == list(range(8))
    assert rows[0] == {
        "hca": "rocep1s0f0",
        "port": 1,
        "index": 0,
        "gid": "fe80:0000:0000:0000:5e25:73ff:fe4c:0a1e",
        "ipv4": "",
        "version": "v1",
        "netdev": NETDEV,
    }
    assert rows[7] == {
        "hca": "rocep1s0f0",
        "port": 1,
        "index": 7,
        "gid": "0000:0000:0000:0000:0000:ffff:0a00:1e01",
        "ipv4": "10.0.30.1",
        "version": "v2",
        "netdev": NETDEV,
    }
    assert [row["ipv4"] for row in rows[2:6]] == ["10.0.22.3", "10.0.22.3", "", ""]


def test_read_table_sorts_numerically_and_by_hca(tmp_path):
    root = build(tmp_path, {**TWIN_HCAS, **TWO_PORTS, **HIGH_INDEX})
    rows = _gid.read_table(root)
    keys = [(row["hca"], row["port"], row["index"]) for row in rows]
    assert keys == sorted(keys)
    first = [key[2] for key in keys if key[:2] == ("rocep1s0f0", 1)]
    assert first == [0, 1, 2, 3, 4, 5, 6, 7, 10, 11]
    assert keys[0][0] == "roceP2p1s0f0"


def test_read_table_tolerates_unreadable_attributes(tmp_path):
    rows = _gid.read_table(build(tmp_path, UNREADABLE_TYPE))
    assert [(row["index"], row["version"], row["netdev"]) for row in rows[2:]] == [
        (2, "", NETDEV),
        (3, "v2", ""),
    ]


def test_read_table_skips_empty_and_bare_link_local(tmp_path):
    bare = "fe80:0000:0000:0000:0000:0000:0000:0000"
    entries = [(ZERO, V1, NETDEV), (bare, V2, NETDEV), *pair("10.0.30.1")]
    root = build(tmp_path, {("rocep1s0f0", 1): entries})
    assert [row["index"] for row in _gid.read_table(root)] == [2, 3]


def test_read_table_ignores_strays(tmp_path):
    root = build(tmp_path, SEED_RANK2)
    (tmp_path / ".rocep1s0f0.tmp").mkdir()
    (tmp_path / "README").write_text("not an HCA\n")
    (tmp_path / "rocep1s0f0" / "ports" / "1" / "gids" / "notes").write_text("x\n")
    assert _gid.list_hcas(root) == ["rocep1s0f0"]
    assert len(_gid.read_table(root)) == 6


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda root: None, "GID table root does not exist or is not a directory"),
        (lambda root: root.mkdir(), "no HCA with a GID table"),
        (lambda root: root.write_text(""), "GID table root does not exist or is not a directory"),
        (
            lambda root: (root / "rocep1s0f0" / "ports" / "1").mkdir(parents=True),
            "no HCA with a GID table",
        ),
    ],
)
def test_read_table_fails_naming_the_root(tmp_path, make, message):
    root = tmp_path / "infiniband"
    make(root)
    with pytest.raises(_gid.GidTableError) as info:
        _gid.read_table(str(root))
    assert str(info.value).startswith(f"{root}: {message}")


def test_read_table_reads_the_twin_tool_layout(tmp_path):
    """The twin's gidtable.py and this reader agree on the on-disk format."""
    tool = os.path.join(os.path.dirname(__file__), *[os.pardir] * 4, "twin", "tools", "gidtable.py")
    if not os.path.exists(tool):
        pytest.skip("twin/tools/gidtable.py not present")
    spec = importlib.util.spec_from_file_location("gidtable", tool)
    gidtable = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gidtable)
    addresses = gidtable.expand(
        "link-local,addrs,ipv6:2001:db8:30::1,empty",
        NETDEV,
        mac=MAC,
        ipv4=["10.0.22.3", "10.0.30.1"],
    )
    gidtable.write_table(str(tmp_path), "rocep1s0f0", 1, NETDEV, addresses, 16)
    rows = _gid.read_table(str(tmp_path))
    assert len(rows) == 8
    assert rows[0]["gid"] == gid(LINK_LOCAL)
    assert _gid.select(rows, "10.0.30.1", 2)["index"] == 5


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0000:0000:0000:0000:0000:ffff:0a00:1e01", "10.0.30.1"),
        ("0000:0000:0000:0000:0000:ffff:0a00:1e0a", "10.0.30.10"),
        ("0000:0000:0000:0000:0000:0000:0a00:1e01", ""),
        ("fe80:0000:0000:0000:5e25:73ff:fe4c:0a1e", ""),
        ("2001:0db8:0030:0000:0000:0000:0000:0001", ""),
        ("not-a-gid", ""),
    ],
)
def test_gid_ipv4(text, expected):
    assert _gid.gid_ipv4(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("fe80:0000:0000:0000:5e25:73ff:fe4c:0a1e", True),
        ("febf:0000:0000:0000:0000:0000:0000:0001", True),
        ("fec0:0000:0000:0000:0000:0000:0000:0001", False),
        ("0000:0000:0000:0000:0000:ffff:0a00:1e01", False),
    ],
)
def test_is_link_local(text, expected):
    assert _gid.is_link_local(text) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("IB/RoCE v1", "v1"), ("RoCE v2", "v2"), ("", ""), (None, ""), ("IB", "")],
)
def test_gid_version(text, expected):
    assert _gid.gid_version(text) == expected


def render_show_gids(rows):
    """What the show_gids script prints for rows (tabs, trailing blank after IPv4)."""
    lines = [
        "DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4 \t\tVER\tDEV",
        "---\t----\t-----\t---\t\t\t\t\t------------ \t---\t---",
    ]
    for row in rows:
        head = f"{row['hca']}\t{row['port']}\t{row['index']}\t{row['gid']}"
        if row["ipv4"]:
            lines.append(f"{head}\t{row['ipv4']} \t{row['version']}\t{row['netdev']}")
        else:
            lines.append(f"{head}\t\t\t{row['version']}\t{row['netdev']}")
    lines.append(f"n_gids_found={len(rows)}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    "layout",
    [SEED_RANK0, SEED_RANK2, TWIN_HCAS, VLAN, UNREADABLE_TYPE, HIGH_INDEX, TWO_PORTS],
    ids=["seed0", "seed2", "twin", "vlan", "unreadable", "high-index", "two-ports"],
)
def test_parse_show_gids_round_trip(tmp_path, layout):
    rows = _gid.read_table(build(tmp_path, layout))
    assert _gid.parse_show_gids(render_show_gids(rows)) == rows
    assert _gid.compare(rows, _gid.parse_show_gids(render_show_gids(rows))) == []


SPACED = """\
DEV        PORT INDEX GID                                     IPv4       VER DEV
---        ---- ----- ---                                     ---------- --- ---
rocep1s0f0 1    0     fe80:0000:0000:0000:5e25:73ff:fe4c:0a1e            v1  enp1s0f0np0
rocep1s0f0 1    7     0000:0000:0000:0000:0000:ffff:0a00:1e01 10.0.30.1  v2  enp1s0f0np0
rocep1s0f0 1    8     0000:0000:0000:0000:0000:ffff:0a00:1e02 10.0.30.2      enp1s0f0np0.30
n_gids_found=3
"""


def test_parse_show_gids_space_aligned():
    rows = _gid.parse_show_gids(SPACED)
    assert [(r["index"], r["ipv4"], r["version"], r["netdev"]) for r in rows] == [
        (0, "", "v1", NETDEV),
        (7, "10.0.30.1", "v2", NETDEV),
        (8, "10.0.30.2", "", "enp1s0f0np0.30"),
    ]


def test_parse_show_gids_strips_colour_and_cut_trailing_tabs():
    text = (
        "\x1b[1mDEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4 \t\tVER\tDEV\x1b(B\x1b[m\n"
        "rocep1s0f0\t1\t7\t0000:0000:0000:0000:0000:ffff:0a00:1e01\t10.0.30.1 \tv2\n"
        "n_gids_found=1\n"
    )
    assert _gid.parse_show_gids(text) == [
        {
            "hca": "rocep1s0f0",
            "port": 1,
            "index": 7,
            "gid": "0000:0000:0000:0000:0000:ffff:0a00:1e01",
            "ipv4": "10.0.30.1",
            "version": "v2",
            "netdev": "",
        }
    ]


def test_parse_show_gids_empty_table():
    assert _gid.parse_show_gids(render_show_gids([])) == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("DEV\tPORT\n", "no n_gids_found= trailer"),
        ("", "no n_gids_found= trailer"),
        ("n_gids_found=2\n", "n_gids_found=2 but lists 0 GIDs"),
        ("n_gids_found=many\n", "line 1: n_gids_found 'many' is not a number"),
        ("rocep1s0f0\t1\n", "line 1: fewer than 4 columns"),
        ("rocep1s0f0 one 7 0000:0000:0000:0000:0000:ffff:0a00:1e01\n", "line 1: port 'one'"),
        ("rocep1s0f0 1 7 ::1 10.0.30.1 v2 eth0 junk\n", "line 1: unexpected columns ['junk']"),
    ],
)
def test_parse_show_gids_rejects(text, message):
    with pytest.raises(_gid.ShowGidsParseError, match=message.replace("[", r"\[")):
        _gid.parse_show_gids(text)


def _row(index, address, version="v2", netdev=NETDEV, hca="rocep1s0f0"):
    return {
        "hca": hca,
        "port": 1,
        "index": index,
        "gid": gid(address),
        "ipv4": _gid.gid_ipv4(gid(address)),
        "version": version,
        "netdev": netdev,
    }


@pytest.mark.parametrize(
    ("sysfs", "listed", "expected"),
    [
        pytest.param([_row(7, "10.0.30.1")], [_row(7, "10.0.30.1")], [], id="equal"),
        pytest.param(
            [_row(7, "10.0.30.1")],
            [{**_row(7, "10.0.30.1"), "gid": gid("10.0.30.1").upper(), "ipv4": "10.0.30.1 "}],
            [],
            id="case-and-ipv4-ignored",
        ),
        pytest.param(
            [_row(7, "10.0.30.1")],
            [_row(7, "10.0.30.1", version="v1")],
            ["rocep1s0f0 port 1 index 7: version is 'v2' in sysfs but 'v1' in show_gids"],
            id="version",
        ),
        pytest.param(
            [_row(5, "10.0.30.1")],
            [_row(5, "10.0.30.2", netdev="enp1s0f0np0.30")],
            [
                "rocep1s0f0 port 1 index 5: gid is '0000:0000:0000:0000:0000:ffff:0a00:1e01'"
                " in sysfs but '0000:0000:0000:0000:0000:ffff:0a00:1e02' in show_gids",
                "rocep1s0f0 port 1 index 5: netdev is 'enp1s0f0np0' in sysfs"
                " but 'enp1s0f0np0.30' in show_gids",
            ],
            id="gid-and-netdev",
        ),
        pytest.param(
            [_row(7, "10.0.30.1"), _row(9, "10.0.30.9")],
            [_row(3, "10.0.30.3"), _row(7, "10.0.30.1")],
            [
                "rocep1s0f0 port 1 index 3: 0000:0000:0000:0000:0000:ffff:0a00:1e03 (v2)"
                " is listed by show_gids only",
                "rocep1s0f0 port 1 index 9: 0000:0000:0000:0000:0000:ffff:0a00:1e09 (v2)"
                " is listed by sysfs only",
            ],
            id="missing-and-extra",
        ),
    ],
)
def test_compare(sysfs, listed, expected):
    assert _gid.compare(sysfs, listed) == expected


def test_compare_detects_a_stale_show_gids(tmp_path):
    """show_gids output captured before the 10.0.22.x address was removed."""
    before = _gid.read_table(build(tmp_path / "before", SEED_RANK0))
    after = _gid.read_table(
        build(tmp_path / "after", {("rocep1s0f0", 1): pair(LINK_LOCAL) + pair("10.0.30.1")})
    )
    differences = _gid.compare(after, _gid.parse_show_gids(render_show_gids(before)))
    assert (
        "rocep1s0f0 port 1 index 7: 0000:0000:0000:0000:0000:ffff:0a00:1e01 (v2) is listed"
        in (differences[-1])
    )
    assert any("index 2: gid is" in line for line in differences)
    assert len(differences) == 6
