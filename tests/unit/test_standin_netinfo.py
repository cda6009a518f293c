"""The SGLang stand-in's NCCL GID check (twin/engine/sparksim/netinfo.py) with two HCAs:
every device of NCCL_IB_HCA is checked against the one NCCL_IB_GID_INDEX, as NCCL does."""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_SPEC = importlib.util.spec_from_file_location(
    "sparksim_netinfo", os.path.join(ROOT, "twin", "engine", "sparksim", "netinfo.py")
)
netinfo = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(netinfo)
GIDTABLE = os.path.join(ROOT, "twin", "tools", "gidtable.py")

LINKS = [("enp1s0f0np0", ["10.0.30.1"]), ("enP2p1s0f0np0", ["10.0.31.1"])]


def table(root, hca, netdev, layout):
    """The twin's own writer (twin/tools/gidtable.py), without reading a real NIC."""
    sys.path.insert(0, os.path.dirname(GIDTABLE))
    spec = importlib.util.spec_from_file_location("gidtable", GIDTABLE)
    gidtable = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gidtable)
    addresses = gidtable.expand(layout, netdev, mac="02:00:00:00:00:01", ipv4=[])
    gidtable.write_table(str(root), hca, 1, netdev, addresses, 16)


@pytest.fixture
def env(tmp_path):
    table(tmp_path, "rocep1s0f0", "enp1s0f0np0", "link-local,ipv4:10.0.30.1")
    table(tmp_path, "roceP2p1s0f0", "enP2p1s0f0np0", "link-local,ipv4:10.0.31.1")
    return {
        "SPARKSIM_SYSFS_ROOT": str(tmp_path),
        "NCCL_IB_HCA": "rocep1s0f0,roceP2p1s0f0",
        "NCCL_IB_GID_INDEX": "3",
        "NCCL_IB_ROCE_VERSION_NUM": "2",
        "NCCL_IB_ADDR_RANGE": "10.0.30.0/23",
    }


def test_every_hca_is_checked_with_the_one_index(env):
    got = netinfo.select_gids(env, LINKS)
    assert [(g["dev"], g["index"], g["ip"], g["netdev"]) for g in got] == [
        ("rocep1s0f0:1", 3, "10.0.30.1", "enp1s0f0np0"),
        ("roceP2p1s0f0:1", 3, "10.0.31.1", "enP2p1s0f0np0"),
    ]


def test_a_second_hca_whose_gid_sits_elsewhere_fails_naming_it(env, tmp_path):
    table(tmp_path, "roceP2p1s0f0", "enP2p1s0f0np0", "link-local,empty,ipv4:10.0.31.1")
    with pytest.raises(netinfo.NetError, match=r"roceP2p1s0f0:1 GID index 3 is empty, not the "
                       r"RoCE v2 GID of 10.0.31.1 \(index 5\)"):  # fmt: skip
        netinfo.select_gids(env, LINKS)
    # Without a pinned index each device finds its own inside the address range.
    env.pop("NCCL_IB_GID_INDEX")
    assert [g["index"] for g in netinfo.select_gids(env, LINKS)] == [3, 5]
