"""Verify the 2-node twin running the DS4-F profile A canary on loopback."""

from __future__ import annotations

import json

from twin_verify import LAUNCHER, curl, engine_flags, inventory, launch_argv, node, split_docker_run

NODES = inventory("inventory/sim-2node")
HEAD, WORKER = sorted(NODES, key=lambda h: NODES[h]["spark_rank"])
URL = "http://127.0.0.1:8890"


def test_api_listens_on_loopback_only():
    listening = node(HEAD).check_output("ss -Hltn").split("\n")
    local = {line.split()[3] for line in listening if line.strip()}
    assert "127.0.0.1:8890" in local
    assert not {a for a in local if a.endswith(":8890") and not a.startswith("127.")}
    # Not reachable from the peer over the management network.
    assert (
        curl(node(WORKER), f"http://{NODES[HEAD]['ansible_host']}:8890/health", timeout=3)[0] == 0
    )


def test_profile_a_runs_graphs_off_without_speculation():
    _opts, _image, command = split_docker_run(launch_argv(node(HEAD)))
    flags = dict(engine_flags(command))
    assert "--disable-cuda-graph" in flags
    assert not [f for f in flags if f.startswith("--speculative")]
    assert flags["--tp-size"] == "2"
    assert flags["--nnodes"] == "2"
    assert flags["--host"] == "127.0.0.1"
    assert flags["--port"] == "8890"
    assert flags["--context-length"] == "1048576"
    assert flags["--max-running-requests"] == "6"
    assert flags["--dist-init-addr"] == f"{NODES[HEAD]['roce_ipv4']}:23010"
    env = [v for o, v in _opts if o == "-e"]
    assert "SGLANG_SM120_FLASHMLA_BACKEND=triton" in env
    assert "TORCH_CUDA_ARCH_LIST=12.1a" in env


def test_auto_gid_mode_leaves_the_index_to_nccl_and_nccl_finds_each_nodes_own():
    """Both halves of each node's port (roce_hcas): NCCL_IB_HCA names both HCAs, the address
    range covers both subnets, and NCCL finds each HCA's own GID (the head's first at 3, the
    worker's at 5, each second function's at 3)."""
    for name, index in ((HEAD, 3), (WORKER, 5)):
        opts, _image, _command = split_docker_run(launch_argv(node(name)))
        env = [v for o, v in opts if o == "-e"]
        # Never an empty NCCL_IB_GID_INDEX (NCCL reads it as 0): none at all.
        assert not [e for e in env if e.startswith("NCCL_IB_GID_INDEX")]
        assert "NCCL_IB_HCA=rocep1s0f0,roceP2p1s0f0" in env
        assert "NCCL_IB_ADDR_RANGE=10.0.40.0/23" in env
        assert "NCCL_IB_ROCE_VERSION_NUM=2" in env
        rank = NODES[name]["spark_rank"]
        log = node(name).check_output(f"docker logs ds4f-canary-r{rank} 2>&1")
        first, second = NODES[name]["roce_hcas"]
        assert f"rocep1s0f0:1 GID index {index} = {first['ipv4']} (RoCE v2" in log
        assert f"roceP2p1s0f0:1 GID index 3 = {second['ipv4']} (RoCE v2, enP2p1s0f0np0)" in log


def test_both_halves_of_the_port_are_up_at_jumbo_mtu_and_persisted():
    for name in (HEAD, WORKER):
        host = node(name)
        for fn in NODES[name]["roce_hcas"]:
            assert host.check_output(f"cat /sys/class/net/{fn['iface']}/mtu") == "9000"
            assert f"{fn['ipv4']}/24" in host.check_output(f"ip -o -4 addr show dev {fn['iface']}")
            # The other node's address of the same function answers a jumbo no-fragment ping.
            peer = next(n for n in NODES if n != name)
            other = next(f for f in NODES[peer]["roce_hcas"] if f["iface"] == fn["iface"])
            host.check_output(f"ping -c 1 -W 2 -M do -s 8972 {other['ipv4']}")
        netplan = host.check_output("cat /etc/netplan/60-sparkfleet-roce.yaml")
        assert "enp1s0f0np0:" in netplan and "enP2p1s0f0np0:" in netplan


def test_smokes_pass_on_the_head():
    host = node(HEAD)
    assert curl(host, f"{URL}/health")[0] == 200
    status, body = curl(host, f"{URL}/v1/models")
    assert status == 200
    assert [m["id"] for m in json.loads(body)["data"]] == ["flash-0731"]

    def ask(prompt, max_tokens=64):
        status, body = curl(
            host,
            f"{URL}/v1/chat/completions",
            body={
                "model": "flash-0731",
                "temperature": 0,
                "max_tokens": max_tokens,
                "messages": [{"role": "user", "content": prompt}],
            },
        )
        assert status == 200, body
        return json.loads(body)["choices"][0]["message"]["content"].strip()

    assert ask("Reply with exactly this string and nothing else: CANARY-OK") == "CANARY-OK"
    assert "323" in ask("What is 17*19? Answer with the number only.")


def test_both_ranks_run_their_current_configuration():
    for name in (HEAD, WORKER):
        assert node(name).check_output(f"{LAUNCHER} status") == "running current"
    # The worker serves the dummy health upstream workers serve, on loopback too.
    assert curl(node(WORKER), f"{URL}/health")[0] == 200
