# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""spark_node_info: one call returns every item, real files and GID trees, faked commands."""

from __future__ import annotations

import hashlib
import json
import os

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.sparkfleet.serving.plugins.module_utils import (
    _converge,
    _engine,
    _node_state,
)
from ansible_collections.sparkfleet.serving.plugins.modules import spark_node_info
from ansible_collections.sparkfleet.serving.tests.unit.plugins.modules.test_roce_gid_info import (
    write_table,
)

IP_JSON = json.dumps(
    [
        {"ifname": "lo", "mtu": 65536, "operstate": "UNKNOWN", "addr_info": []},
        {
            "ifname": "enp1s0f0np0",
            "mtu": 9000,
            "operstate": "UP",
            "addr_info": [
                {"family": "inet", "local": "10.0.22.1", "prefixlen": 24},
                {"family": "inet6", "local": "fe80::1", "prefixlen": 64},
                {"family": "inet", "local": "10.0.30.1", "prefixlen": 24},
            ],
        },
    ]
)
IMAGE_JSON = json.dumps([{"Id": "sha256:" + "a" * 64, "RepoTags": ["sglang:0.5.9"]}])
CONTAINER_JSON = json.dumps(
    [
        {
            "Id": "c" * 64,
            "Name": "/sglang-rank0",
            "Image": "sha256:" + "a" * 64,
            "State": {
                "Status": "running",
                "Running": True,
                "StartedAt": "2026-12-03T19:00:00.1Z",
                "ExitCode": 0,
            },
        }
    ]
)
INFO_JSON = json.dumps(
    {"ServerVersion": "28.2.2", "Runtimes": {"runc": {}, "nvidia": {}}, "ID": "x"}
)
# `sshd -T -C user=root,...` on Debian 12 (OpenSSH 9.2), the lines the rule reads among others.
SSHD_T = (
    "port 22\npermitrootlogin without-password\npubkeyauthentication yes\n"
    "authenticationmethods any\npubkeyauthoptions none\n"
)
PING_OK = "8980 bytes from 10.0.30.2: icmp_seq=1 ttl=64 time=0.071 ms\n"
PING_TOO_BIG = (1, "", "ping: local error: message too long, mtu=1500\n")


class Exited(Exception):
    def __init__(self, payload):
        super().__init__(payload)
        self.payload = payload


@pytest.fixture
def node(monkeypatch):
    """Fake binaries: every command is answered from ``node['answers']`` by its argv."""
    calls = {"argv": [], "bins": {"ip", "docker", "ping"}}

    def answer(argv):
        name = os.path.basename(argv[0])
        if name == "ip":
            return 0, IP_JSON, ""
        if name == "docker" and argv[1] == "info":
            return calls.get("info", (0, INFO_JSON, ""))
        if name == "docker" and argv[1] == "stats":
            return 0, "1.5GiB / 23.5GiB\n", ""
        if name == "docker" and argv[1] == "image":
            return 1, IMAGE_JSON, "Error: No such image: missing:1\n"
        if name == "docker":
            return 0, CONTAINER_JSON, ""
        if name == "sshd":
            return calls.get("sshd", (0, SSHD_T, ""))
        if argv[-1] == "10.0.30.2":
            return 0, PING_OK, ""
        if argv[-1] == "10.0.30.3":
            return PING_TOO_BIG
        return 1, "1 packets transmitted, 0 received, 100% packet loss\n", ""

    def run_command(self, args, **kwargs):
        calls["argv"].append(list(args))
        assert kwargs.get("environ_update", {}).get("LANG") == "C"
        return answer(args)

    def get_bin_path(self, name, required=False, opt_dirs=None):
        return f"/usr/bin/{name}" if name in calls["bins"] else None

    def exit_json(self, **kwargs):
        raise Exited(kwargs)

    def fail_json(self, msg, **kwargs):
        raise Exited(dict(kwargs, msg=msg, failed=True))

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", get_bin_path)
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)
    return calls


def run(args):
    with patch_module_args(args), pytest.raises(Exited) as info:
        spark_node_info.main()
    return info.value.payload


def test_everything_in_one_call(node, tmp_path):
    root = write_table(tmp_path / "ib", "rocep1s0f0", ["10.0.22.1", "10.0.30.1"])
    script = tmp_path / "launcher"
    script.write_text("#!/bin/sh\n")
    os.chmod(script, 0o750)
    link = tmp_path / "current"
    link.symlink_to("rev-abc")
    record = tmp_path / "record.json"
    record.write_text('{"gid_index": 5}')
    result = run(
        {
            "nics": ["enp1s0f0np0", "enP7s7"],
            "gids": [{"address": "10.0.30.1", "hca": "rocep1s0f0", "sysfs_root": root}],
            "paths": [str(script), str(link), str(tmp_path / "gone")],
            "json_files": [str(record)],
            "images": ["sglang:0.5.9", "missing:1"],
            "containers": ["sglang-rank0"],
            "peers": ["10.0.30.2", "10.0.30.3", "10.0.30.4"],
            "mtu": 9000,
            "_ansible_check_mode": True,
        }
    )
    assert result["changed"] is False
    nic = result["nics"]["enp1s0f0np0"]
    assert (nic["mtu"], nic["operstate"], nic["ipv4"]) == (
        9000,
        "up",
        ["10.0.22.1/24", "10.0.30.1/24"],
    )
    assert result["nics"]["enP7s7"] == {"exists": False}
    assert result["gids"][0]["found"] and result["gids"][0]["index"] == 5
    got = result["paths"][str(script)]
    assert (got["type"], got["mode"], got["sha256"]) == (
        "file",
        "0750",
        hashlib.sha256(b"#!/bin/sh\n").hexdigest(),
    )
    assert result["paths"][str(link)]["target"] == "rev-abc"
    assert result["paths"][str(tmp_path / "gone")] == {"exists": False}
    assert result["json_files"][str(record)]["content"] == {"gid_index": 5}
    assert result["images"]["sglang:0.5.9"]["id"] == "sha256:" + "a" * 64
    assert result["images"]["missing:1"] == {"exists": False}
    assert result["containers"]["sglang-rank0"]["running"] is True
    assert result["peers"]["10.0.30.2"] == {"ok": True, "size": 8972, "rtt_ms": 0.071}
    assert "does not fit the path MTU" in result["peers"]["10.0.30.3"]["error"]
    assert result["peers"]["10.0.30.4"]["error"] == "no answer"
    pings = [a for a in node["argv"] if a[0].endswith("ping")]
    assert all(a[1:3] == ["-M", "do"] and "8972" in a for a in pings) and len(pings) == 3
    # docker asked once for all images and once for all containers
    assert sum(a[0].endswith("docker") for a in node["argv"]) == 2


def test_gid_not_found_is_reported_not_fatal(node, tmp_path):
    root = write_table(tmp_path / "ib", "rocep1s0f0", ["10.0.22.1"])
    result = run({"gids": [{"address": "10.0.30.1", "sysfs_root": root}]})
    (row,) = result["gids"]
    assert row["found"] is False
    assert "10.0.30.1" in row["error"] and "10.0.22.1" in row["error"]


def test_missing_tools_are_named(node):
    node["bins"].clear()
    result = run({"nics": ["x"], "images": ["i:1"], "peers": ["10.0.30.2"]})
    assert "iproute2" in result["nics"]["x"]["error"]
    assert "docker is not installed" in result["images"]["i:1"]["error"]
    assert result["peers"]["10.0.30.2"]["error"] == "ping is not installed"


def test_an_empty_call_runs_nothing(node):
    result = run({})
    assert node["argv"] == []
    assert {k: result[k] for k in ("nics", "paths", "images", "containers", "peers")} == {
        "nics": {},
        "paths": {},
        "images": {},
        "containers": {},
        "peers": {},
    }


def test_bad_ping_size_fails(node):
    assert run({"mtu": 20, "peers": ["10.0.30.2"]})["failed"] is True


def test_a_weights_entry_without_a_pinned_commit_is_refused_not_a_crash(node, tmp_path):
    # A profile without model_revision: the plan's item has commit None (site.yml does not
    # pass such a plan; the module refuses it with its own message, not a TypeError).
    result = run(
        {"weights": [{"repo": "org/model", "commit": None}], "weights_store": str(tmp_path)}
    )
    assert result["failed"] is True
    assert result["msg"] == "each weights entry needs repo and commit (strings)"


@pytest.mark.parametrize(
    ("rc", "out", "err", "expected"),
    [
        (0, PING_OK, "", {"ok": True, "size": 8972, "rtt_ms": 0.071}),
        (1, "From 10.0.30.9 icmp_seq=1 Frag needed and DF set (mtu = 1500)\n", "", "path MTU"),
        (2, "", "ping: connect: Network is unreachable\n", "Network is unreachable"),
        (1, "100% packet loss\n", "", "no answer"),
    ],
)
def test_ping_record(rc, out, err, expected):
    got = _node_state.ping_record(rc, out, err, 8972)
    if isinstance(expected, dict):
        assert got == expected
    else:
        assert got["ok"] is False and expected in got["error"]


def test_docker_records_short_reference():
    got = _node_state.docker_records(
        json.dumps([{"Id": "sha256:b", "RepoTags": ["engine:latest"]}]), ["engine"], "image"
    )
    assert got == {"engine": {"exists": True, "id": "sha256:b"}}


def test_nic_records_bad_json():
    assert "ip -j addr" in _node_state.nic_records("not json", ["eth0"])["eth0"]["error"]


def test_disk_free_measures_the_nearest_existing_parent(node, tmp_path):
    wanted = tmp_path / "models" / "org" / "repo"
    result = run({"disk_free": [str(wanted), str(tmp_path)]})
    st = os.statvfs(tmp_path)
    record = result["disk_free"][str(wanted)]
    assert record["at"] == str(tmp_path)
    # The same figure as df's Available (bavail x fragment size), give or take a write.
    assert abs(record["free_bytes"] - st.f_bavail * st.f_frsize) < 64 * 1024 * 1024
    assert result["disk_free"][str(tmp_path)]["at"] == str(tmp_path)
    # Reading the disk needs no command.
    assert node["argv"] == []


def _host_files(tmp_path):
    (tmp_path / "cdi").mkdir()
    (tmp_path / "cdi" / "nvidia.yaml").write_text("kind: nvidia.com/gpu\n")
    (tmp_path / "cdi" / "other.yaml").write_text("kind: vendor.com/fpga\n")
    (tmp_path / "cdi" / "notes.txt").write_text("nvidia.com/gpu\n")
    (tmp_path / "meminfo").write_text("MemTotal: 100 kB\nMemAvailable:   2048 kB\n")
    (tmp_path / "model").mkdir()
    (tmp_path / "template.jinja").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "model")
    return {
        "image": "sglang:0.5.9",
        "container": "sglang-rank0",
        "devices": [str(tmp_path / "model"), str(tmp_path / "uverbs0")],
        "paths": [str(tmp_path / p) for p in ("model", "template.jinja", "link", "gone")],
        "cdi_dirs": [str(tmp_path / "cdi"), str(tmp_path / "no-such-dir")],
        "meminfo": str(tmp_path / "meminfo"),
    }


def test_the_host_checks_read_in_the_same_call(node, tmp_path):
    spec = _host_files(tmp_path)
    host = run({"host": spec})["host"]
    assert host["docker"] == {"ok": True, "version": "28.2.2"}
    assert host["runtimes"] == ["nvidia", "runc"]
    assert host["cdi"] == [str(tmp_path / "cdi" / "nvidia.yaml")]
    assert host["devices"] == {spec["devices"][0]: "present", spec["devices"][1]: "missing"}
    assert list(host["paths"].values()) == ["dir", "file", "dir", "missing"]
    assert host["image_id"] == "sha256:" + "a" * 64
    assert host["mem_available"] == 2048 * 1024
    # The rank runs: what it holds now is freed by a restart.
    assert host["mem_held"] == int(1.5 * 1024**3)
    # The rank's memory is read only for it, and docker is asked once for its info.
    assert [
        "/usr/bin/docker",
        "stats",
        "--no-stream",
        "--format",
        "{{.MemUsage}}",
        "sglang-rank0",
    ] in node["argv"]
    assert sum(1 for argv in node["argv"] if argv[1:2] == ["info"]) == 1
    # The result is what the host checks' rule reads: a node with everything passes.
    profile = {"image": "sglang:0.5.9", "container": {}}
    assert _engine.host_problems("spark-1", profile, host) == []


def test_the_host_reading_without_a_daemon_or_docker(node, tmp_path):
    spec = _host_files(tmp_path)
    node["info"] = (1, json.dumps({"ServerVersion": ""}), "Cannot connect to the Docker daemon\n")
    host = run({"host": spec})["host"]
    assert host["docker"] == {"ok": False, "error": "Cannot connect to the Docker daemon"}
    assert host["image_id"] == "" and host["mem_held"] == 0
    # The files are read all the same.
    assert host["mem_available"] == 2048 * 1024
    node["bins"].discard("docker")
    assert run({"host": spec})["host"]["docker"] == {
        "ok": False,
        "error": "docker is not installed",
    }


def test_meminfo_that_cannot_be_read(tmp_path):
    assert _converge.mem_available(str(tmp_path / "missing")) is None
    (tmp_path / "m").write_text("MemTotal: 1 kB\n")
    assert _converge.mem_available(str(tmp_path / "m")) is None


def test_the_host_tools_are_read_in_the_same_call(node, tmp_path):
    """Programs by name or path, processes by name, sshd's settings for the fan-out user."""
    rrsync = tmp_path / "rrsync"
    rrsync.write_text("#!/bin/sh\n")
    rrsync.chmod(0o755)
    node["bins"].update({"rsync", "sshd"})
    spec = dict(
        _host_files(tmp_path),
        programs=["rsync", str(rrsync), str(tmp_path / "absent"), "nosuchtool"],
        # pytest's own process is named after its interpreter; no process is named this:
        processes=["sparkfleet-no-such-daemon"],
        sshd_user="root",
        sshd_addr="10.0.30.1",
    )
    host = run({"host": spec})["host"]
    assert host["programs"] == {
        "rsync": "present",
        str(rrsync): "present",
        str(tmp_path / "absent"): "missing",
        "nosuchtool": "missing",
    }
    assert host["processes"] == {"sparkfleet-no-such-daemon": False}
    assert ["/usr/bin/sshd", "-T", "-C", "user=root,host=localhost,addr=10.0.30.1"] in node["argv"]
    assert host["sshd"] == {
        "ok": True,
        "settings": {
            "permitrootlogin": "without-password",
            "pubkeyauthentication": "yes",
            "authenticationmethods": "any",
        },
    }
    # sshd that cannot say (no host keys, a broken config) is reported, not a crash.
    node["sshd"] = (255, "", "sshd: no hostkeys available -- exiting.\n")
    assert run({"host": spec})["host"]["sshd"] == {
        "ok": False,
        "error": "sshd: no hostkeys available -- exiting.",
    }
    node["bins"].discard("sshd")
    assert run({"host": spec})["host"]["sshd"] == {"ok": False, "error": "sshd is not installed"}


def test_running_processes_reads_each_process_name(tmp_path):
    for pid, comm in (("1", "tini"), ("17", "cron"), ("18", "sshd"), ("self", "python3")):
        (tmp_path / pid).mkdir()
        (tmp_path / pid / "comm").write_text(comm + "\n")
    (tmp_path / "99").mkdir()  # a process that ended while /proc was read: no comm
    got = _node_state.running_processes(["cron", "dockerd", "python3"], str(tmp_path))
    assert got == {"cron": True, "dockerd": False, "python3": False}


def test_the_ports_netplan_profiles_are_read_in_the_same_call(node, tmp_path, monkeypatch):
    """The netplan reading (module_utils/_netplan, tested there) with the module's options."""
    seen = []

    def port_profiles(ifaces, netplan_dir, files, netplan):
        seen.append((ifaces, netplan_dir, files, netplan))
        return {"ports": {i: [{"id": i, "mtu": 9000}] for i in ifaces}, "error": None}

    monkeypatch.setattr(spark_node_info, "port_profiles", port_profiles)
    monkeypatch.setattr(
        spark_node_info, "running_processes", lambda names: dict.fromkeys(names, True)
    )
    absent = run({"netplan": {"ifaces": ["enp1s0f0np0"], "dir": str(tmp_path / "none")}})
    assert absent["netplan"] == {"ports": {}, "error": None, "networkmanager": True}
    assert seen == []
    # netplan's directory without netplan itself: said, not guessed.
    unread = run({"netplan": {"ifaces": ["enp1s0f0np0"], "dir": str(tmp_path)}})
    assert unread["netplan"]["error"] == "netplan is not installed"
    node["bins"].add("netplan")
    out = run(
        {
            "netplan": {
                "ifaces": ["enp1s0f0np0"],
                "dir": str(tmp_path),
                "files": {"60-sparkfleet-roce.yaml": "network: {}\n"},
            }
        }
    )
    assert out["netplan"] == {
        "ports": {"enp1s0f0np0": [{"id": "enp1s0f0np0", "mtu": 9000}]},
        "error": None,
        "networkmanager": True,
    }
    assert seen == [
        (
            ["enp1s0f0np0"],
            str(tmp_path),
            {"60-sparkfleet-roce.yaml": "network: {}\n"},
            "/usr/bin/netplan",
        )
    ]


def test_the_verbs_device_of_each_hca_is_read(node, tmp_path):
    """The kernel lists an HCA's verbs devices under its sysfs entry; /dev holds them or not."""
    root, dev = tmp_path / "ib", tmp_path / "dev-ib"
    (root / "rocep1s0f0" / "device" / "infiniband_verbs" / "uverbs0").mkdir(parents=True)
    (root / "roceP2p1s0f0" / "device").mkdir(parents=True)  # ib_uverbs not loaded for it
    dev.mkdir()
    assert _node_state.uverbs_record(str(root), "rocep1s0f0", str(dev)) == {
        "devices": [f"{dev}/uverbs0"],
        "missing": [f"{dev}/uverbs0"],
    }
    (dev / "uverbs0").write_text("")
    assert _node_state.uverbs_record(str(root), "rocep1s0f0", str(dev))["missing"] == []
    assert _node_state.uverbs_record(str(root), "roceP2p1s0f0", str(dev)) == {
        "devices": [],
        "missing": [],
    }
    assert "no such HCA" in _node_state.uverbs_record(str(root), "mlx5_9", str(dev))["error"]
    out = run({"host": {"hcas": ["rocep1s0f0"], "ib_sysfs_root": str(root)}})
    # In the module the devices are looked for under /dev/infiniband itself.
    assert out["host"]["uverbs"] == {
        "rocep1s0f0": {
            "devices": ["/dev/infiniband/uverbs0"],
            "missing": []
            if os.path.exists("/dev/infiniband/uverbs0")
            else ["/dev/infiniband/uverbs0"],
        }
    }


def test_every_functions_gid_row_and_a_nic_inside_a_data_plane_subnet(node, tmp_path, monkeypatch):
    """gids: one row per data-plane function; a NIC of another name in one of their subnets
    is a warning (IP_JSON: enp1s0f0np0 holds 10.0.22.1 and 10.0.30.1)."""
    root = tmp_path / "ib"
    write_table(root, "rocep1s0f0", ["10.0.30.1"])
    warnings = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, msg: warnings.append(msg))
    out = run(
        {
            "nics": ["enp1s0f0np0"],
            "gids": [
                {"address": "10.0.30.1", "hca": "rocep1s0f0", "sysfs_root": str(root)},
                {"address": "10.0.31.1", "hca": "rocep1s0f0", "sysfs_root": str(root)},
            ],
            "data_subnets": [{"iface": "enP2p1s0f0np0", "subnet": "10.0.30.0/24"}],
        }
    )
    assert [g["found"] for g in out["gids"]] == [True, False]
    assert out["gids"][0]["index"] == 3
    assert warnings == [
        "enp1s0f0np0 holds 10.0.30.1/24, inside the data-plane subnet 10.0.30.0/24 of "
        "enP2p1s0f0np0: its route competes with the data plane's; move it out of that subnet"
    ]
