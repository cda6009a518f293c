"""The ssh twin's real state, read over the same path the playbooks use: ssh to each
node's sshd as the operator tiger (key-based, host keys pinned), root through sudo."""

from __future__ import annotations

import configparser
import json
import os
import subprocess

import pytest
import testinfra
from twin_verify import REPO, inventory

NODES = inventory("inventory/sim-ssh")
NAMES = sorted(NODES, key=lambda h: NODES[h]["spark_rank"])
SSH_DIR = os.path.join(REPO, ".cache", "twin-ssh", "ssh")
KEY = os.path.join(SSH_DIR, "id_ed25519")
KNOWN_HOSTS = os.path.join(SSH_DIR, "known_hosts")
PINNED = f"-o UserKnownHostsFile={KNOWN_HOSTS} -o StrictHostKeyChecking=yes -o IdentitiesOnly=yes"


def over_ssh(name, sudo=True):
    return testinfra.get_host(
        f"ssh://tiger@{NODES[name]['ansible_host']}",
        ssh_identity_file=KEY,
        ssh_extra_args=PINNED,
        sudo=sudo,
    )


def ssh(name, known_hosts):
    return subprocess.run(
        [
            "ssh", "-o", f"UserKnownHostsFile={known_hosts}", "-o", "StrictHostKeyChecking=yes",
            "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-i", KEY,
            f"tiger@{NODES[name]['ansible_host']}", "true",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )  # fmt: skip


def test_shipped_configuration_checks_host_keys():
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(REPO, "ansible.cfg"))
    assert cfg.get("defaults", "host_key_checking", fallback="True").lower() not in (
        "false",
        "no",
        "0",
    )


@pytest.mark.parametrize("name", NAMES)
def test_host_keys_are_pinned_and_per_node(name, tmp_path):
    assert ssh(name, KNOWN_HOSTS).returncode == 0
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    refused = ssh(name, str(empty))
    assert refused.returncode != 0
    assert "Host key verification failed" in refused.stderr
    with open(KNOWN_HOSTS, encoding="utf-8") as handle:
        keys = [line.split()[2] for line in handle if line.strip()]
    assert len(set(keys)) == len(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_operator_is_not_root_and_becomes_root_through_sudo(name):
    assert over_ssh(name, sudo=False).check_output("id -un") == "tiger"
    assert over_ssh(name).check_output("id -un") == "root"


@pytest.mark.parametrize("name", NAMES)
def test_files_are_root_owned_and_secrets_unreadable_to_the_operator(name):
    host = over_ssh(name)
    for path, mode in (
        ("/etc/sparkfleet/sglang.env", 0o600),
        ("/usr/local/sbin/sparkfleet-sglang", 0o755),
        ("/var/log/sparkfleet", 0o750),
        ("/etc/netplan/60-sparkfleet-roce.yaml", 0o600),
        ("/var/lib/sparkfleet/sglang-patches/manifest.json", 0o644),
    ):
        f = host.file(path)
        assert f.exists, path
        assert (f.user, f.group, f.mode) == ("root", "root", mode), path
    operator = over_ssh(name, sudo=False)
    denied = operator.run("cat /etc/sparkfleet/sglang.env")
    assert denied.rc != 0
    assert "Permission denied" in denied.stderr
    assert operator.run("ls /var/log/sparkfleet").rc != 0


@pytest.mark.parametrize("name", NAMES)
def test_every_cross_node_channel_binds_the_nic_every_rank_reaches(name):
    host = over_ssh(name)
    rank = NODES[name]["spark_rank"]
    env = json.loads(
        host.check_output(f"docker inspect -f '{{{{json .Config.Env}}}}' qwen38-tp4-r{rank}")
    )
    env = dict(item.split("=", 1) for item in env)
    first_ipv4 = host.check_output(
        "ip -o -4 addr show dev enP7s7 | awk '{print $4}' | head -n 1 | cut -d/ -f1"
    )
    assert env["NCCL_SOCKET_IFNAME"] == "enP7s7"
    assert env["GLOO_SOCKET_IFNAME"] == env["NCCL_SOCKET_IFNAME"]
    assert env["SGLANG_HOST_IP"] == first_ipv4 == NODES[name]["ansible_host"]


@pytest.mark.parametrize("name", NAMES)
def test_rank_runs_the_recorded_image_id(name):
    host = over_ssh(name)
    rank = NODES[name]["spark_rank"]
    image, label = host.check_output(
        f"docker inspect -f '{{{{.Image}}}} {{{{index .Config.Labels \"sparkfleet.image-id\"}}}}' "
        f"qwen38-tp4-r{rank}"
    ).split()
    assert image == label
    assert (
        host.check_output(f"docker inspect -f '{{{{.Config.Image}}}}' qwen38-tp4-r{rank}") == image
    )


def test_head_answers_over_the_data_it_was_given():
    host = over_ssh(NAMES[0])
    assert (
        host.check_output("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8081/health")
        == "200"
    )


STORE = "/home/tiger/models/.sparkfleet-weights"
MODEL_DIR = "RadixArk--Qwen3.8-27B-NVFP4-BF16-LMHead"
MODEL_REV = "831ef89418185caf007200f207be19b8b92d7e21"


def test_weights_fan_out_as_the_operator_not_root():
    """This sshd refuses root: the head fanned the weights out to the worker as tiger, whose
    key may run only rrsync into the store; what arrived is root's again and verified."""
    head, worker = (over_ssh(n) for n in NAMES)
    keys = worker.file("/home/tiger/.ssh/authorized_keys").content_string
    line = next(x for x in keys.splitlines() if x.endswith("sparkfleet-weights"))
    assert f'command="/usr/bin/rrsync -wo -no-del -no-lock {STORE}"' in line
    assert line.startswith("restrict,")
    assert (
        worker.run("sshd -T -C user=root,host=x,addr=127.0.0.1").stdout.count("permitrootlogin no")
        == 1
    )
    revision = f"{STORE}/{MODEL_DIR}/{MODEL_REV}"
    manifest = json.loads(worker.file(f"{revision}/.sparkfleet-manifest.json").content_string)
    owners = worker.check_output(f"find {revision} -printf '%u\\n' | sort -u").split()
    assert owners == ["root"]
    for entry in manifest["files"]:
        got = worker.check_output(f"sha256sum {revision}/{entry['path']} | cut -d' ' -f1")
        assert got == entry["sha256"], entry
        assert got == head.check_output(f"sha256sum {revision}/{entry['path']} | cut -d' ' -f1")
    assert worker.run(f"ls -a {STORE}/{MODEL_DIR} | grep -c partial").stdout.strip() == "0"
