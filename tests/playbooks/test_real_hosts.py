"""Issue 12, offline parts: --limit refused in the first play, owned env keys refused.

Same bad-inventory harness as test_validate.py: the hosts are on loopback (no sshd there) with a
1 s ssh timeout, so any attempt to reach one shows up as an unreachable host.
"""

from __future__ import annotations

import os

import pytest
from test_validate import GOOD_GROUP, REPO, mutate, run_playbook, run_validate, write_inventory


@pytest.mark.parametrize("playbook", ["site.yml", "playbooks/site.yml", "playbooks/restart.yml"])
def test_limit_is_refused_by_the_inventory_checks_before_any_node_is_reached(playbook, tmp_path):
    hosts, group, host_extra = mutate()
    write_inventory(str(tmp_path), hosts, group, host_extra)
    result = run_playbook(str(tmp_path), os.path.join(REPO, playbook), "--limit", "spark-2,spark-3")
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert (
        "this run holds only spark-2, spark-3 of the cluster's spark-1, spark-2, spark-3, spark-4"
        in output
    )
    assert "fix: run without --limit" in output
    # Refused by the inventory checks: no host was contacted, no step after them ran (the
    # probe is the first that reaches a node).
    assert "UNREACHABLE" not in output
    assert "sparkfleet.serving.converge :" not in output
    assert "Run the host checks" not in output


@pytest.mark.parametrize("playbook", ["playbooks/validate.yml"])
def test_read_only_playbooks_may_be_limited(playbook, tmp_path):
    hosts, group, host_extra = mutate()
    write_inventory(str(tmp_path), hosts, group, host_extra)
    result = run_playbook(str(tmp_path), os.path.join(REPO, playbook), "--limit", "spark-2")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "failed=0" in result.stdout


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (
            {"NCCL_SOCKET_IFNAME": "enp1s0f0np0"},
            "sets NCCL_SOCKET_IFNAME, which the collection owns",
        ),
        ({"NCCL_IB_GID_INDEX": "3"}, "sets NCCL_IB_GID_INDEX"),
        ({"MASTER_ADDR": "10.0.30.9"}, "derived from rank 0's roce_ipv4"),
        ({"PYTHONDONTWRITEBYTECODE": "0"}, "Pitfall 6"),
        ({"HF_ENDPOINT": "https://huggingface.co"}, "the profile field hf_endpoint"),
        ({"HF_HUB_ENABLE_HF_TRANSFER": "1"}, "sets HF_HUB_ENABLE_HF_TRANSFER"),
        ({"SGLANG_HOST_IP": "10.0.22.1"}, "first IPv4 of sglang_nccl_socket_ifname"),
        ({"GLOO_SOCKET_IFNAME": "enp1s0f0np0"}, "the variable sglang_nccl_socket_ifname"),
    ],
)
def test_profile_env_cannot_replace_owned_keys(env, expected, tmp_path):
    hosts, group, host_extra = mutate(
        group={"sglang_profile_overrides": {"env": {"NCCL_DEBUG": "INFO", **env}}}
    )
    write_inventory(str(tmp_path), hosts, group, host_extra)
    result = run_validate(str(tmp_path))
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "spark-1: sglang_engine.env" in output
    assert expected in output
    assert "fix: remove it from sglang_profile_overrides.env" in output
    assert "UNREACHABLE" not in output


def test_profile_env_with_its_own_keys_passes(tmp_path):
    hosts, group, host_extra = mutate(
        group={
            "sglang_profile_overrides": {
                **GOOD_GROUP["sglang_profile_overrides"],
                "env": {"NCCL_DEBUG": "WARN", "TORCH_CUDA_ARCH_LIST": "12.1a"},
            }
        }
    )
    write_inventory(str(tmp_path), hosts, group, host_extra)
    result = run_validate(str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
