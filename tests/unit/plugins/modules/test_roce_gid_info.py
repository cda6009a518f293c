# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Run roce_gid_info's main() against sysfs-shaped trees in tmp_path."""

from __future__ import annotations

import ipaddress
import os

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.sparkfleet.serving.plugins.modules import roce_gid_info

NETDEV = "enp1s0f0np0"
LINK_LOCAL_GID = "fe80:0000:0000:0000:5e25:73ff:fe4c:0a1e"
SHOW_GIDS = "/usr/sbin/show_gids"
SEED_RANK2 = ["2001:db8::3", "10.0.30.3"]  # seed ranks 2-3: no cross-wire, v2 at 5


class Exited(Exception):
    def __init__(self, payload):
        super().__init__(payload)
        self.payload = payload


class Failed(Exited):
    pass


def gid(address):
    ip = ipaddress.ip_address(address)
    if ip.version == 4:
        ip = ipaddress.IPv6Address("::ffff:" + str(ip))
    packed = ip.packed.hex()
    return ":".join(packed[i : i + 4] for i in range(0, 32, 4))


def write_table(root, hca, addresses, kinds=("IB/RoCE v1", "RoCE v2"), netdev=NETDEV, slots=16):
    """Port 1 of ``hca``: link-local pair, then one pair per address, then zero GIDs."""
    base = os.path.join(str(root), hca, "ports", "1")
    for sub in ("gids", "gid_attrs/types", "gid_attrs/ndevs"):
        os.makedirs(os.path.join(base, sub), exist_ok=True)
    entries = [(LINK_LOCAL_GID, kind) for kind in kinds]
    entries += [(gid(address), kind) for address in addresses for kind in kinds]
    for index in range(slots):
        gid_text, kind = entries[index] if index < len(entries) else ("0000:" * 7 + "0000", None)
        with open(os.path.join(base, "gids", str(index)), "w", encoding="ascii") as handle:
            handle.write(gid_text + "\n")
        if kind:
            with open(os.path.join(base, "gid_attrs/types", str(index)), "w") as handle:
                handle.write(kind + "\n")
            with open(os.path.join(base, "gid_attrs/ndevs", str(index)), "w") as handle:
                handle.write(netdev + "\n")
    return str(root)


@pytest.fixture
def module_calls(monkeypatch):
    """Turn exit_json/fail_json into exceptions; record warnings and commands."""
    calls = {"warnings": [], "commands": [], "bin": None, "show_gids": (0, "", "")}

    def exit_json(self, **kwargs):
        raise Exited(kwargs)

    def fail_json(self, msg, **kwargs):
        raise Failed(dict(kwargs, msg=msg, failed=True))

    def get_bin_path(self, name, required=False, opt_dirs=None):
        assert name == "show_gids"
        assert required is False
        return calls["bin"]

    def run_command(self, args, **kwargs):
        calls["commands"].append((args, kwargs))
        return calls["show_gids"]

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", get_bin_path)
    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, w: calls["warnings"].append(w))
    return calls


def run(args, expect=Exited):
    with patch_module_args(args), pytest.raises(expect) as info:
        roce_gid_info.main()
    assert isinstance(info.value, expect), info.value.payload
    return info.value.payload


@pytest.fixture
def seed_rank0(tmp_path):
    """Seed node with the 10.0.22.x cross-wire and an IPv6 global address: v2 at 7."""
    return write_table(
        tmp_path / "infiniband", "rocep1s0f0", ["10.0.22.3", "2001:db8::1", "10.0.30.1"]
    )


@pytest.mark.parametrize("check_mode", [False, True], ids=["run", "check"])
def test_finds_the_seed_index(module_calls, seed_rank0, check_mode):
    result = run(
        {"address": "10.0.30.1", "sysfs_root": seed_rank0, "_ansible_check_mode": check_mode}
    )
    assert result["changed"] is False
    assert {
        k: result[k] for k in ("gid_index", "hca", "port", "gid", "netdev", "roce_version")
    } == {
        "gid_index": 7,
        "hca": "rocep1s0f0",
        "port": 1,
        "gid": "0000:0000:0000:0000:0000:ffff:0a00:1e01",
        "netdev": NETDEV,
        "roce_version": 2,
    }
    assert [row["index"] for row in result["gids"]] == list(range(8))
    assert set(result["gids"][0]) == {"hca", "port", "index", "gid", "ipv4", "version", "netdev"}
    assert result["show_gids_checked"] is False
    assert result["show_gids_disagreement"] == []
    assert module_calls["commands"] == []


@pytest.mark.parametrize(
    ("addresses", "args", "expected"),
    [
        pytest.param(SEED_RANK2, {"address": "10.0.30.3"}, 5, id="without-cross-wire"),
        pytest.param(SEED_RANK2, {"address": "10.0.30.3", "roce_version": 1}, 4, id="v1"),
        pytest.param(SEED_RANK2, {"address": "10.0.30.3", "hca": ""}, 5, id="empty-hca"),
        pytest.param(SEED_RANK2, {"address": "10.0.30.3", "hca": "rocep1s0f0"}, 5, id="hca-filter"),
        pytest.param(["10.0.30.10", "10.0.30.1"], {"address": "10.0.30.1"}, 5, id="not-.10"),
    ],
)
def test_finds(module_calls, tmp_path, addresses, args, expected):
    root = write_table(tmp_path, "rocep1s0f0", addresses)
    result = run(dict(args, sysfs_root=root))
    assert result["gid_index"] == expected
    assert result["roce_version"] == args.get("roce_version", 2)


def test_fails_on_v1_only_table(module_calls, tmp_path):
    root = write_table(tmp_path, "rocep1s0f0", ["10.0.30.9"], kinds=("IB/RoCE v1",))
    result = run({"address": "10.0.30.9", "sysfs_root": root}, expect=Failed)
    assert result["msg"] == (
        "10.0.30.9: no RoCE v2 GID on rocep1s0f0; found v1 at rocep1s0f0 port 1 index 1"
        " (10.0.30.9, enp1s0f0np0); IPv4 GIDs present: v1 at rocep1s0f0 port 1 index 1"
        " (10.0.30.9, enp1s0f0np0)"
    )
    assert len(result["gids"]) == 2
    assert "gid_index" not in result


def test_fails_on_stale_address(module_calls, seed_rank0):
    result = run({"address": "10.0.30.2", "sysfs_root": seed_rank0}, expect=Failed)
    assert result["msg"].startswith(
        "10.0.30.2: no RoCE v2 GID on rocep1s0f0; no GID carries 10.0.30.2"
    )
    assert "v2 at rocep1s0f0 port 1 index 3 (10.0.22.3, enp1s0f0np0)" in result["msg"]
    assert "index 7 (10.0.30.1, enp1s0f0np0)" in result["msg"]


def test_fails_on_duplicate_without_filter(module_calls, tmp_path):
    write_table(tmp_path, "rocep1s0f0", ["10.0.30.1"])
    write_table(tmp_path, "roceP2p1s0f0", ["10.0.30.1"], netdev="enP2p1s0f0np0")
    result = run({"address": "10.0.30.1", "sysfs_root": str(tmp_path)}, expect=Failed)
    assert result["msg"].startswith("10.0.30.1: 2 RoCE v2 GIDs match: roceP2p1s0f0 port 1 index 3")
    assert "set hca (inventory: roce_hca)" in result["msg"]
    result = run({"address": "10.0.30.1", "sysfs_root": str(tmp_path), "hca": "roceP2p1s0f0"})
    assert (result["hca"], result["gid_index"], result["netdev"]) == (
        "roceP2p1s0f0",
        3,
        "enP2p1s0f0np0",
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"address": "10.0.30"}, "address '10.0.30' is not an IPv4 address"),
        ({"address": "10.0.30.1", "hca": "mlx5_0"}, "10.0.30.1: hca mlx5_0 not found"),
    ],
)
def test_fails_on_bad_arguments(module_calls, seed_rank0, args, message):
    result = run(dict(args, sysfs_root=seed_rank0), expect=Failed)
    assert result["msg"].startswith(message)


def test_rejects_unknown_roce_version(module_calls, seed_rank0):
    result = run(
        {"address": "10.0.30.1", "sysfs_root": seed_rank0, "roce_version": 3}, expect=Failed
    )
    assert "roce_version" in result["msg"]


@pytest.mark.parametrize(
    "make", [lambda root: None, lambda root: root.mkdir()], ids=["missing", "empty"]
)
def test_fails_naming_the_root(module_calls, tmp_path, make):
    root = tmp_path / "infiniband"
    make(root)
    result = run({"address": "10.0.30.1", "sysfs_root": str(root)}, expect=Failed)
    assert result["msg"].startswith(f"{root}: ")
    assert "gids" not in result


def show_gids_text(rows):
    lines = ["DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4 \t\tVER\tDEV", "---\t----\t-----\t---"]
    for row in rows:
        head = f"{row['hca']}\t{row['port']}\t{row['index']}\t{row['gid']}"
        if row["ipv4"]:
            lines.append(f"{head}\t{row['ipv4']} \t{row['version']}\t{row['netdev']}")
        else:
            lines.append(f"{head}\t\t\t{row['version']}\t{row['netdev']}")
    return "\n".join([*lines, f"n_gids_found={len(rows)}", ""])


@pytest.fixture
def default_root(monkeypatch, seed_rank0):
    """Make the seed tree the module's default root, so that show_gids is consulted."""
    monkeypatch.setattr(roce_gid_info, "DEFAULT_SYSFS_ROOT", seed_rank0)
    return seed_rank0


def _seed_rows(module_calls, root):
    module_calls["bin"] = None
    return run({"address": "10.0.30.1", "sysfs_root": root})["gids"]


def test_show_gids_agrees(module_calls, default_root):
    rows = _seed_rows(module_calls, default_root)
    module_calls["bin"] = SHOW_GIDS
    module_calls["show_gids"] = (0, show_gids_text(rows), "")
    result = run({"address": "10.0.30.1", "sysfs_root": default_root + "/"})
    assert result["gid_index"] == 7
    assert result["show_gids_checked"] is True
    assert result["show_gids_disagreement"] == []
    assert module_calls["warnings"] == []
    assert module_calls["commands"] == [([SHOW_GIDS], {"environ_update": {"LANG": "C"}})]


def test_show_gids_disagrees(module_calls, default_root):
    rows = _seed_rows(module_calls, default_root)
    stale = [dict(row, version="v2") if row["index"] == 6 else row for row in rows[:7]]
    module_calls["bin"] = SHOW_GIDS
    module_calls["show_gids"] = (0, show_gids_text(stale), "")
    result = run({"address": "10.0.30.1"})
    assert result["gid_index"] == 7
    assert result["show_gids_checked"] is True
    assert result["show_gids_disagreement"] == [
        "rocep1s0f0 port 1 index 6: version is 'v1' in sysfs but 'v2' in show_gids",
        "rocep1s0f0 port 1 index 7: 0000:0000:0000:0000:0000:ffff:0a00:1e01 (v2)"
        " is listed by sysfs only",
    ]
    assert module_calls["warnings"] == [
        f"show_gids disagrees with {default_root}: {line}"
        for line in result["show_gids_disagreement"]
    ]


def test_show_gids_disagreement_travels_with_a_failure(module_calls, default_root):
    rows = _seed_rows(module_calls, default_root)
    module_calls["bin"] = SHOW_GIDS
    module_calls["show_gids"] = (0, show_gids_text(rows[:-1]), "")
    result = run({"address": "10.0.30.9"}, expect=Failed)
    assert result["msg"].startswith("10.0.30.9: no RoCE v2 GID on rocep1s0f0")
    assert len(result["show_gids_disagreement"]) == 1
    assert len(module_calls["warnings"]) == 1


@pytest.mark.parametrize(
    ("show_gids", "warning"),
    [
        (
            (1, "", "cat: /sys/class/infiniband: No such file"),
            "show_gids (/usr/sbin/show_gids) exited 1",
        ),
        ((0, "DEV\tPORT\n", ""), "show_gids printed no n_gids_found= trailer"),
    ],
    ids=["rc", "unparsable"],
)
def test_show_gids_unusable_only_warns(module_calls, default_root, show_gids, warning):
    module_calls["bin"] = SHOW_GIDS
    module_calls["show_gids"] = show_gids
    result = run({"address": "10.0.30.1"})
    assert result["gid_index"] == 7
    assert result["show_gids_checked"] is False
    assert [w for w in module_calls["warnings"] if w.startswith(warning)] == module_calls[
        "warnings"
    ]
    assert len(module_calls["warnings"]) == 1


@pytest.mark.parametrize(
    ("bin_path", "args"),
    [
        (None, {}),
        (SHOW_GIDS, {"compare_show_gids": False}),
    ],
    ids=["not-installed", "turned-off"],
)
def test_show_gids_not_consulted(module_calls, default_root, bin_path, args):
    module_calls["bin"] = bin_path
    result = run(dict(args, address="10.0.30.1"))
    assert result["show_gids_checked"] is False
    assert module_calls["commands"] == []


def test_show_gids_not_consulted_for_other_roots(module_calls, seed_rank0):
    module_calls["bin"] = SHOW_GIDS
    result = run({"address": "10.0.30.1", "sysfs_root": seed_rank0})
    assert result["show_gids_checked"] is False
    assert module_calls["commands"] == []
