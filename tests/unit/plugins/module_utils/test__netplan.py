# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""_netplan: the port's profiles in netplan's generated output, their files and MTU.

The generated trees below are what netplan 0.106 (Debian 12) writes for these inputs
(recorded from `netplan generate --root-dir`); port_profiles runs a fake `netplan` that
writes such a tree from the YAML files it is given, so the scratch root, the added file
and the error paths are exercised without netplan on the test machine.
"""

from __future__ import annotations

import os
import sys
import textwrap

import pytest

from ansible_collections.sparkfleet.serving.plugins.filter import probe as probe_filters
from ansible_collections.sparkfleet.serving.plugins.module_utils import _netplan

OURS = "/etc/netplan/60-sparkfleet-roce.yaml"
ROLE_FILE = textwrap.dedent(
    """\
    network:
      version: 2
      ethernets:
        enp1s0f0np0:
          renderer: NetworkManager
          mtu: 9000
          addresses: [10.0.30.1/24]
    """
)
NM_FILE = textwrap.dedent(
    """\
    network:
      version: 2
      ethernets:
        NM-5f0c:
          renderer: NetworkManager
          match:
            name: "enp1s0f0np0"
          dhcp4: true
          networkmanager:
            uuid: "5f0c2a64-8d3e-4c61-9a55-0c7b1d2e3f40"
    """
)
NM_KEYFILE = """[connection]
id={id}
type=ethernet
interface-name={iface}

[ethernet]
wake-on-lan=0
{mtu}
[ipv4]
method=manual
"""


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)


def keyfile(root, netdef, iface="enp1s0f0np0", mtu=None):
    write(
        root,
        f"run/NetworkManager/system-connections/netplan-{netdef}.nmconnection",
        NM_KEYFILE.format(id=netdef, iface=iface, mtu=f"mtu={mtu}\n" if mtu else ""),
    )


def test_keyfiles_and_networkd_units_for_the_port_are_its_profiles(tmp_path):
    root = str(tmp_path)
    keyfile(root, "enp1s0f0np0", mtu=9000)
    keyfile(root, "NM-5f0c")
    keyfile(root, "enP7s7", iface="enP7s7", mtu=1500)  # another port: not counted
    write(root, "run/systemd/network/10-netplan-bond.network", "[Match]\nName=enp1s0f0np0\n")
    write(root, "run/systemd/network/10-netplan-bond.link", "[Link]\nMTUBytes=9216\n")
    write(root, "run/systemd/network/10-netplan-x.network", "[Match]\nName=eth9\n")
    assert _netplan.read_profiles(root, "enp1s0f0np0") == [
        {
            "id": "NM-5f0c",
            "renderer": "NetworkManager",
            "path": "run/NetworkManager/system-connections/netplan-NM-5f0c.nmconnection",
            "mtu": None,
        },
        {
            "id": "bond",
            "renderer": "networkd",
            "path": "run/systemd/network/10-netplan-bond.network",
            "mtu": 9216,
        },
        {
            "id": "enp1s0f0np0",
            "renderer": "NetworkManager",
            "path": "run/NetworkManager/system-connections/netplan-enp1s0f0np0.nmconnection",
            "mtu": 9000,
        },
    ]


def test_a_networkd_profile_has_its_mtu_in_the_network_unit(tmp_path):
    write(
        str(tmp_path),
        "run/systemd/network/10-netplan-enp1s0f0np0.network",
        "[Match]\nName=enp1s0f0np0\n\n[Link]\nMTUBytes=9000\n\n[Network]\nLinkLocalAddressing=no\n",
    )
    (profile,) = _netplan.read_profiles(str(tmp_path), "enp1s0f0np0")
    assert (profile["renderer"], profile["mtu"]) == ("networkd", 9000)


def test_the_files_that_define_a_profile_are_named():
    texts = {"60-sparkfleet-roce.yaml": ROLE_FILE, "90-NM-5f0c.yaml": NM_FILE, "bad.yaml": ":\n-"}
    assert _netplan.defining_files(texts, "NM-5f0c") == ["90-NM-5f0c.yaml"]
    assert _netplan.defining_files(texts, "enp1s0f0np0") == ["60-sparkfleet-roce.yaml"]
    assert _netplan.defining_files(texts, "eth9") == []


# A stand-in for `netplan generate --root-dir R`: one keyfile per ethernets entry of each
# YAML file under R/etc/netplan, its interface the match name or the id, its mtu the file's;
# a file holding "broken" makes it fail as netplan does on a bad file.
FAKE_NETPLAN = """#!{python}
import glob, os, sys, yaml
root = sys.argv[sys.argv.index("--root-dir") + 1]
out = os.path.join(root, "run/NetworkManager/system-connections")
os.makedirs(out, exist_ok=True)
for path in sorted(glob.glob(os.path.join(root, "etc/netplan/*.yaml"))):
    text = open(path).read()
    if "broken" in text:
        sys.stderr.write(path + ":1:1: Error in network definition: broken\\n")
        sys.exit(1)
    network = (yaml.safe_load(text) or {{}}).get("network", {{}})
    for netdef, spec in (network.get("ethernets") or {{}}).items():
        iface = (spec.get("match") or {{}}).get("name", netdef)
        mtu = "mtu=%s\\n" % spec["mtu"] if "mtu" in spec else ""
        with open(os.path.join(out, "netplan-%s.nmconnection" % netdef), "w") as fh:
            fh.write("[connection]\\nid=%s\\ninterface-name=%s\\n\\n[ethernet]\\n%s"
                     % (netdef, iface, mtu))
"""


@pytest.fixture
def netplan(tmp_path):
    fake = tmp_path / "netplan"
    fake.write_text(FAKE_NETPLAN.format(python=sys.executable))
    fake.chmod(0o755)
    etc = tmp_path / "etc-netplan"
    etc.mkdir()
    (etc / "01-network-manager-all.yaml").write_text(
        "network:\n  version: 2\n  renderer: NetworkManager\n"
    )
    return str(fake), etc


def test_the_file_about_to_be_written_is_generated_with_the_nodes_files(netplan):
    fake, etc = netplan
    name = os.path.basename(OURS)
    alone = _netplan.port_profiles(["enp1s0f0np0"], str(etc), {name: ROLE_FILE}, fake)
    assert alone["error"] is None
    assert [(p["id"], p["mtu"], p["files"]) for p in alone["ports"]["enp1s0f0np0"]] == [
        ("enp1s0f0np0", 9000, [os.path.join(str(etc), name)])
    ]
    assert (
        _netplan.netplan_problems(
            alone, "spark-2", "enp1s0f0np0", os.path.join(str(etc), name), 9000
        )
        == []
    )
    # NetworkManager's own file for the port, already on the node: two profiles.
    (etc / "90-NM-5f0c.yaml").write_text(NM_FILE)
    both = _netplan.port_profiles(["enp1s0f0np0"], str(etc), {name: ROLE_FILE}, fake)
    assert [p["id"] for p in both["ports"]["enp1s0f0np0"]] == ["NM-5f0c", "enp1s0f0np0"]
    (problem,) = _netplan.netplan_problems(
        both, "spark-2", "enp1s0f0np0", os.path.join(str(etc), name), 9000
    )
    nm = os.path.join(str(etc), "90-NM-5f0c.yaml")
    assert problem.startswith("spark-2: netplan gives enp1s0f0np0 2 profiles: NM-5f0c ")
    assert f"NM-5f0c (NetworkManager, MTU unset, from {nm})" in problem
    assert f"Fix: remove {nm} (a NetworkManager connection" in problem
    # The scratch root is gone; the node's directory holds what it held.
    assert sorted(os.listdir(etc)) == ["01-network-manager-all.yaml", "90-NM-5f0c.yaml"]


def test_a_file_netplan_refuses_is_an_error_not_a_profile_count(netplan):
    fake, etc = netplan
    (etc / "50-bad.yaml").write_text("network: broken\n")
    result = _netplan.port_profiles(["enp1s0f0np0"], str(etc), {}, fake)
    assert result["ports"] == {}
    assert result["error"].startswith("netplan generate failed: ")
    assert "50-bad.yaml:1:1: Error in network definition" in result["error"]
    (problem,) = _netplan.netplan_problems(result, "spark-1", "enp1s0f0np0", OURS, 9000)
    assert problem.startswith("spark-1: cannot tell which profiles netplan gives enp1s0f0np0:")
    missing = _netplan.port_profiles(["enp1s0f0np0"], str(etc), {}, str(etc / "no-netplan"))
    assert missing["error"].startswith("netplan generate did not run:")


@pytest.mark.parametrize(
    ("profiles", "want"),
    [
        ([], "netplan generates no profile for enp1s0f0np0 from " + OURS),
        (
            [
                {
                    "id": "enp1s0f0np0",
                    "renderer": "networkd",
                    "mtu": 1500,
                    "files": [OURS, "/etc/netplan/99-override.yaml"],
                }
            ],
            "netplan's profile for enp1s0f0np0 has MTU 1500, not roce_mtu 9000: another file "
            f"defining it ({OURS}, /etc/netplan/99-override.yaml) overrides {OURS}",
        ),
    ],
    ids=["none", "overridden-mtu"],
)
def test_a_port_without_the_roles_profile_or_mtu_is_refused(profiles, want):
    (problem,) = probe_filters.roce_netplan_problems(
        {"ports": {"enp1s0f0np0": profiles}, "error": None},
        "spark-3",
        ["enp1s0f0np0"],
        OURS,
        "9000",
    )
    assert problem.startswith("spark-3: ") and want in problem
