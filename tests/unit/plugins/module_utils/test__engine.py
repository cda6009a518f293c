"""Launch argv from an engine profile, checked against the seed recipes."""

from __future__ import annotations

import os
import shlex
import sys

import pytest

from ansible_collections.sparkfleet.serving.plugins.module_utils import _engine

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", ".."))
import shipped_presets
from seed_recipes import QWEN38_TP4_LAUNCH, SRT

raw = shipped_presets.load
preset = shipped_presets.resolve


# Seed 002, section 6: the flags after `python3 -m sglang.launch_server`, rank 2.
SEED_QWEN_RANK2 = shlex.split(
    QWEN38_TP4_LAUNCH.format(rank=2, gid=5, srt=SRT).split("sglang.launch_server", 1)[1]
)


def test_qwen_preset_renders_the_seed_flags_in_the_seed_order():
    # The seed's flags, in its order; then the metrics the watchdog's stall check reads.
    assert _engine.server_args(preset("qwen38_27b_tp4_dflash2"), 2, "10.0.30.1") == [
        *SEED_QWEN_RANK2,
        "--enable-metrics",
    ]


def test_metrics_can_be_turned_off():
    profile = dict(preset("qwen38_27b_tp4_dflash2"), enable_metrics=False)
    assert _engine.server_args(profile, 2, "10.0.30.1") == SEED_QWEN_RANK2


@pytest.mark.parametrize(
    ("name", "present", "absent"),
    [
        ("ds4f_flash0731_tp2_a_graphs_off", ["--disable-cuda-graph"], ["--speculative-algorithm"]),
        (
            "ds4f_flash0731_tp2_b_graphs_only",
            [],
            ["--disable-cuda-graph", "--speculative-algorithm"],
        ),
        (
            "ds4f_flash0731_tp2_c_eagle",
            [
                "--speculative-algorithm",
                "EAGLE",
                "--speculative-eagle-topk",
                "1",
                "--speculative-num-steps",
                "2",
                "--speculative-num-draft-tokens",
                "3",
            ],
            ["--disable-cuda-graph"],
        ),
        (
            "ds4f_flash0731_tp2_d_dspark",
            ["--speculative-algorithm", "DSPARK", "--speculative-dspark-block-size", "5"],
            ["--disable-cuda-graph", "--speculative-num-draft-tokens"],
        ),
    ],
)
def test_ds4f_profiles_differ_only_where_the_seed_says(name, present, absent):
    args = _engine.server_args(preset(name), 1, "10.0.30.1")
    joined = " ".join(args)
    assert " ".join(present) in joined
    for flag in absent:
        assert flag not in args
    for common in (
        ["--tp-size", "2"],
        ["--nnodes", "2"],
        ["--node-rank", "1"],
        ["--host", "127.0.0.1"],
        ["--port", "8890"],
        ["--context-length", "1048576"],
        ["--max-running-requests", "6"],
        ["--mem-fraction-static", "0.80"],
        ["--dist-init-addr", "10.0.30.1:23010"],
    ):
        assert " ".join(common) in joined


@pytest.mark.parametrize(
    ("value", "text"),
    [(0.5, "0.50"), (0.8, "0.80"), (0.875, "0.875"), (8, "8"), (1048576, "1048576")],
)
def test_numbers_are_written_as_operators_write_them(value, text):
    args = _engine.server_args({"mem_fraction_static": value}, 0, "10.0.30.1")
    assert args[args.index("--mem-fraction-static") + 1] == text


def test_single_node_has_no_rendezvous_address():
    args = _engine.server_args({"nnodes": 1, "tp_size": 1}, 0, "10.0.30.1")
    assert "--dist-init-addr" not in args


def test_extra_args_come_last_as_given():
    args = _engine.server_args({"port": 1, "extra_args": ["--log-level", "debug"]}, 0, "10.0.30.1")
    assert args[-2:] == ["--log-level", "debug"]


@pytest.mark.parametrize(
    ("spec", "window"),
    [
        ({}, 0),
        ({"algorithm": None, "num_draft_tokens": 8}, 0),
        ({"algorithm": "DFLASH", "num_draft_tokens": 8}, 8),
        ({"algorithm": "EAGLE", "num_steps": 2, "num_draft_tokens": 3, "eagle_topk": 1}, 3),
        ({"algorithm": "EAGLE", "num_steps": 5, "num_draft_tokens": 3}, 6),
        ({"algorithm": "DSPARK", "dspark_block_size": 5}, 5),
    ],
)
def test_speculative_window(spec, window):
    assert _engine.speculative_window({"speculative": spec}) == window


def test_container_args_of_the_seed_and_of_a_twin():
    qwen = preset("qwen38_27b_tp4_dflash2")
    assert _engine.container_args(qwen) == shlex.split(
        "--gpus all --memory 100g --memory-swap 100g --shm-size 16g --network host --ipc=host "
        "--cap-add IPC_LOCK --ulimit memlock=-1:-1 --device /dev/infiniband"
    )
    twin = dict(qwen, container={"gpus": None, "devices": [], "network": "host", "ipc": "host"})
    assert _engine.container_args(twin) == ["--network", "host", "--ipc=host"]
    assert _engine.container_volumes(qwen)[:2] == [
        "-v",
        "/home/tiger/.config/qwen38/sglang-cache:/cache",
    ]


def test_both_functions_of_the_port_are_in_the_rank_config_and_in_nccls_environment():
    functions = [
        {"iface": "enp1s0f0np0", "hca": "rocep1s0f0", "address": "10.0.30.2"},
        {"iface": "enP2p1s0f0np0", "hca": "roceP2p1s0f0", "address": "10.0.31.2"},
    ]
    cfg = _engine.rank_config(
        {"image": "i"}, RANK, PATHS, {}, PATCHES, dict(ROCE, functions=functions), []
    )
    assert [
        (link["iface"], link["gid"]["hca"], link["gid"]["address"]) for link in cfg["node"]["links"]
    ] == [
        ("enp1s0f0np0", "rocep1s0f0", "10.0.30.2"),
        ("enP2p1s0f0np0", "roceP2p1s0f0", "10.0.31.2"),
    ]
    env = _engine.nccl_env(
        "10.0.30.1",
        23000,
        "enP7s7",
        ["rocep1s0f0", "roceP2p1s0f0"],
        ["10.0.30.0/24", "10.0.31.0/24"],
    )
    assert env["NCCL_IB_HCA"] == "rocep1s0f0,roceP2p1s0f0"
    assert env["NCCL_IB_ADDR_RANGE"] == "10.0.30.0/23"
    assert _engine.addr_range(["10.0.30.0/24", "10.0.33.0/24"]) == "10.0.0.0/18"
    assert _engine.addr_range(["10.0.29.0/24", "10.0.30.0/24"]) == "10.0.28.0/22"
    assert _engine.roce_functions([], "h", "i", "10.0.30.2", "10.0.30.0/24") == [
        {"hca": "h", "iface": "i", "ipv4": "10.0.30.2", "subnet": "10.0.30.0/24"}
    ]


def test_nccl_env_leaves_the_gid_index_to_the_launcher():
    env = _engine.nccl_env("10.0.30.1", 23000, "enP7s7", "rocep1s0f0", "10.0.30.0/24")
    assert env == {
        "NCCL_SOCKET_IFNAME": "enP7s7",
        "NCCL_IB_HCA": "rocep1s0f0",
        "NCCL_IB_ROCE_VERSION_NUM": "2",
        "NCCL_IB_ADDR_RANGE": "10.0.30.0/24",
        "MASTER_ADDR": "10.0.30.1",
        "MASTER_PORT": "23000",
    }


@pytest.mark.parametrize(("key", "shim"), [(False, False), (True, True)])
def test_python_command_hides_the_api_key_behind_the_shim(key, shim):
    command = _engine.python_command({"python": "python3"}, key)
    assert command[:3] == ["python3", "--check-hash-based-pycs", "always"]
    if shim:
        assert command[3] == "-c"
        assert "os.environ.pop('SGLANG_API_KEY')" in command[4]
        assert "run_module('sglang.launch_server'" in command[4]
    else:
        assert command[3:] == ["-m", "sglang.launch_server"]


RANK = {
    "rank": 1,
    "host": "spark-2",
    "name": "qwen38-tp4-r1",
    "launcher": "/usr/local/sbin/sparkfleet-sglang",
    "image_id": "sha256:" + "a" * 64,
    "stop_timeout_s": 30,
    "log_max_size": "100m",
    "log_max_files": 3,
    "boot_wait_s": 300,
}
PATHS = {
    "env_file": "/etc/sparkfleet/sglang.env",
    "log_dir": "/var/log/sparkfleet",
    "stopped_mark": "/var/lib/sparkfleet/sglang.stopped",
    "meminfo": "/proc/meminfo",
    "stat_file": "/proc/stat",
}
PATCHES = {
    "mounts": [["/var/lib/sparkfleet/patches/x/serving_chat.py", "/sgl/serving_chat.py"]],
    "pyc_masks": [["/var/lib/sparkfleet/patches/empty", "/sgl/__pycache__/serving_chat.pyc"]],
}
ROCE = {
    "iface": "enp1s0f0np0",
    "mtu": 9000,
    "gid_mode": "discover",
    "gid_index": "3",
    "gid": "0000:0000:0000:0000:0000:ffff:0a00:1e02",
    "roce_version": 2,
    "hca": "rocep1s0f0",
    "gid_port": 1,
    "address": "10.0.30.2",
    "sysfs_root": "/sys/class/infiniband",
}


def test_rank_config_is_the_launch_the_launcher_runs():
    profile = {
        "image": "lmsysorg/sglang:spark",
        "container": {"gpus": "all", "memory": "100g", "volumes": ["/models:/models"]},
    }
    cfg = _engine.rank_config(
        profile,
        RANK,
        PATHS,
        {"HF_HUB_OFFLINE": "1", "NCCL_IB_HCA": "rocep1s0f0"},
        PATCHES,
        ROCE,
        ["python3", "-m", 1],
    )
    # Secrets stay in the env file the container reads; the environment follows it, in order,
    # then the profile's mounts, then the patches and the bytecode masks (read-only).
    assert cfg["docker_args"] == [
        "--gpus",
        "all",
        "--memory",
        "100g",
        "--network",
        "host",
        "--env-file",
        "/etc/sparkfleet/sglang.env",
        "-e",
        "HF_HUB_OFFLINE=1",
        "-e",
        "NCCL_IB_HCA=rocep1s0f0",
        "-v",
        "/models:/models",
        "-v",
        "/var/lib/sparkfleet/patches/x/serving_chat.py:/sgl/serving_chat.py:ro",
        "-v",
        "/var/lib/sparkfleet/patches/empty:/sgl/__pycache__/serving_chat.pyc:ro",
    ]
    assert cfg["command"] == ["python3", "-m", "1"]
    assert cfg["patch_files"] == ["/var/lib/sparkfleet/patches/x/serving_chat.py"]
    assert cfg["image"] == "lmsysorg/sglang:spark"
    assert cfg["image_id"] == RANK["image_id"]
    assert (cfg["rank"], cfg["stop_timeout_s"], cfg["log_max_files"]) == (1, 30, 3)
    # memcheck's inputs: the node's name, the file it reads, the profile's memory limit.
    assert cfg["host"] == "spark-2"
    assert cfg["memory"] == {
        "meminfo": "/proc/meminfo",
        "need_bytes": 100 * 1024**3,
        "setting": "100g",
    }
    assert cfg["node"] == {
        # Where the launcher finds the GID at each start, not the index published now: a
        # moved index changes neither this file nor the configuration hash.
        "links": [
            {
                "iface": "enp1s0f0np0",
                "mtu": 9000,
                "gid": {
                    "root": "/sys/class/infiniband",
                    "hca": "rocep1s0f0",
                    "address": "10.0.30.2",
                    "roce_version": 2,
                },
            }
        ],
        "boot_wait_s": 300,
        "stat_file": "/proc/stat",
    }
    moved = dict(ROCE, gid_index="9", gid="0000:0000:0000:0000:0000:ffff:0a00:1e02", gid_port=1)
    assert _engine.rank_config(
        profile, RANK, PATHS, {}, PATCHES, moved, ["python3"]
    ) == _engine.rank_config(profile, RANK, PATHS, {}, PATCHES, ROCE, ["python3"])


def test_rank_config_checks_no_gid_row_when_nccl_picks_it():
    roce = dict(ROCE, gid_mode="auto", gid_index=None)
    cfg = _engine.rank_config({"image": "i"}, RANK, PATHS, {}, PATCHES, roce, [])
    assert cfg["node"]["links"] == [{"iface": "enp1s0f0np0", "mtu": 9000, "gid": None}]
    with pytest.raises(ValueError, match="unknown gid_mode 'guess'"):
        _engine.rank_config(
            {"image": "i"}, RANK, PATHS, {}, PATCHES, dict(ROCE, gid_mode="guess"), []
        )
    # No memory limit in the profile: nothing for memcheck to compare.
    assert cfg["memory"]["need_bytes"] == 0


def test_a_rank_container_is_the_profile_name_and_the_rank():
    assert _engine.rank_container("qwen38-tp4", 2) == "qwen38-tp4-r2"
    # Inventory values arrive as strings; a rank that is not a number is an error.
    assert _engine.rank_container("ds4f", "1") == "ds4f-r1"
    with pytest.raises(ValueError):
        _engine.rank_container("ds4f", "one")
