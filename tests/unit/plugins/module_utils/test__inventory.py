"""Offline inventory checks: one mistake per case, one message naming host, variable, fix."""

from __future__ import annotations

import copy

import pytest

from ansible_collections.sparkfleet.serving.plugins.module_utils import _inventory

ENGINE = {
    "image": "qwen38-dflash2:v1.2.2",
    "model_path": "/home/tiger/models/m",
    "served_model_name": "qwen3.8-27b",
    "container_name": "qwen38-tp4",
    "family": "qwen3",
    "tp_size": 4,
    "nnodes": 4,
    "port": 8081,
    "dist_init_port": 23000,
    "host": "0.0.0.0",
    "watchdog_timeout": 120,
    "health_timeout_s": 900,
    "min_new_tokens": 16,
    "speculative": {"algorithm": "DFLASH", "num_draft_tokens": 8},
    "patches": [{"file": "/x/tokenizer_manager.py", "apply": ["max_tokens_clamp"]}],
    "extra_args": [],
}


def nodes(count=4, **changes):
    out = []
    for i in range(count):
        out.append(
            {
                "host": f"spark-{i + 1}",
                "spark_rank": i,
                "ansible_host": f"192.168.3.{10 * i + 3}",
                "roce_ipv4": f"10.0.30.{i + 1}",
                "spark_mgmt_iface": "enP7s7",
                "spark_mgmt_subnet": "192.168.3.0/24",
                "roce_iface": "enp1s0f0np0",
                "roce_hca": "rocep1s0f0",
                "roce_subnet": "10.0.30.0/24",
                "roce_mtu": 9000,
                "roce_gid_mode": "discover",
                "roce_sysfs_root": "/sys/class/infiniband",
                "sglang_nccl_socket_ifname": "enP7s7",
                "sglang_profile": "qwen38_27b_tp4_dflash2",
                "sglang_profile_overrides": {},
            }
        )
    for key, value in changes.items():
        host, var = key.split("__")
        out[int(host) - 1][var] = value
    return out


def engine(**changes):
    out = copy.deepcopy(ENGINE)
    out.update(changes)
    return out


def test_a_good_cluster_has_no_problem_and_derives_the_order():
    errors, warnings, ranks = _inventory.check_cluster(nodes(), ENGINE, api_key_set=True)
    assert errors == []
    assert warnings == []
    assert _inventory.bring_up_order(ranks) == ["spark-4", "spark-3", "spark-2", "spark-1"]


@pytest.mark.parametrize(
    ("cluster", "eng", "message"),
    [
        (
            nodes(**{"3__spark_rank": 1}),
            ENGINE,
            "spark-3: spark_rank 1 is also the rank of spark-2; fix:",
        ),
        (
            nodes(**{"4__spark_rank": 7}),
            ENGINE,
            "spark-4: spark_rank 7 is out of range for 4 nodes",
        ),
        (nodes(**{"2__spark_rank": None}), ENGINE, "spark-2: spark_rank is not set; fix:"),
        (
            nodes(**{"2__spark_rank": True}),
            ENGINE,
            "spark-2: spark_rank is True, not a non-negative integer",
        ),
        (nodes(**{"2__spark_rank": "1"}), ENGINE, None),
        (nodes(3), ENGINE, "sglang_engine.nnodes is 4 but spark_nodes has 3 nodes"),
        (nodes(), engine(tp_size=2), "x pp_size = 2, but 4 nodes x 1 GPU = 4"),
        (nodes(), engine(tp_size=2, pp_size=2), None),
        (
            nodes(**{"2__ansible_host": "spark-2.lab"}),
            ENGINE,
            "spark-2: ansible_host is 'spark-2.lab', not an IPv4",
        ),
        (
            nodes(**{"2__roce_ipv4": "10.0.30.255"}),
            ENGINE,
            "10.0.30.255 is not a host address of roce_subnet",
        ),
        (
            nodes(**{"4__ansible_host": "192.168.3.3"}),
            ENGINE,
            "spark-4: ansible_host 192.168.3.3 is also used by spark-1",
        ),
        (
            nodes(**{f"{i}__spark_mgmt_subnet": "10.0.0.0/8" for i in range(1, 5)}),
            ENGINE,
            "roce_subnet 10.0.30.0/24 overlaps spark_mgmt_subnet 10.0.0.0/8",
        ),
        (nodes(**{"2__roce_mtu": 1500}), ENGINE, "spark-2: roce_mtu differs from spark-1's"),
        (
            nodes(**{"2__roce_iface": "enP7s7"}),
            ENGINE,
            "spark-2: roce_iface is the management NIC enP7s7",
        ),
        (
            nodes(**{"2__roce_iface": "a-name-longer-than-15"}),
            ENGINE,
            "not a network interface name",
        ),
        (
            nodes(**{"1__roce_gid_mode": "guess"}),
            ENGINE,
            "roce_gid_mode is 'guess'; fix: use discover or auto",
        ),
        (nodes(**{"1__roce_sysfs_root": "sys/class"}), ENGINE, "roce_sysfs_root is 'sys/class'"),
        (nodes(), engine(port=22), "sglang_engine.port is 22, used by sshd"),
        (nodes(), engine(dist_init_port=8081), "dist_init_port 8081 clashes with the API port"),
        (
            nodes(),
            engine(extra_args=["--node-rank=1"]),
            "extra_args contains --node-rank; fix: remove it",
        ),
        (nodes(), engine(extra_args=["--api-key", "x"]), "the vaulted variable sglang_api_key"),
        (nodes(), engine(image="lmsysorg/sglang"), "has no tag or digest"),
        (nodes(), engine(image="lmsysorg/sglang@sha256:6f91b6bbe3"), "carries a truncated digest"),
        (nodes(), engine(image="lmsysorg/sglang@sha256:" + "a" * 64), None),
        (nodes(), engine(image="registry:5000/sglang"), "has no tag or digest"),
        (
            nodes(),
            engine(model_revision="9e165c30"),
            "model_revision '9e165c30' looks like a truncated commit",
        ),
        (nodes(), engine(model_revision="9e165c30…"), "is truncated"),
        (nodes(), engine(model_revision="main"), None),
        (
            nodes(),
            engine(family="deepseek_v4", speculative={"algorithm": "NEXTN", "num_draft_tokens": 3}),
            "NEXTN, which DeepSeek-V4 does not accept",
        ),
        (
            nodes(),
            engine(family="deepseek_v4", speculative={"algorithm": "EAGLE", "num_steps": 2}),
            None,
        ),
        (
            nodes(),
            engine(min_new_tokens=8),
            "min_new_tokens 8 does not exceed the speculative window (8 tokens)",
        ),
        (
            nodes(),
            engine(patches=[]),
            "patches lack max_tokens_clamp while DFLASH takes 8 tokens per step",
        ),
        (nodes(), engine(patches=[], speculative={"algorithm": None}), None),
        (nodes(), engine(watchdog_timeout=0), "sglang_engine.watchdog_timeout is 0"),
        (nodes(), engine(served_model_name=""), "sglang_engine.served_model_name is empty"),
    ],
)
def test_each_problem_is_named(cluster, eng, message):
    errors, _warnings, _ranks = _inventory.check_cluster(cluster, eng, api_key_set=True)
    if message is None:
        assert errors == []
    else:
        assert any(message in e for e in errors), errors
        assert all("; fix: " in e for e in errors), errors


def test_gaps_are_reported_once_with_the_missing_rank():
    cluster = nodes()
    cluster[3]["spark_rank"] = 4
    errors = _inventory.check_cluster(cluster, ENGINE, True)[0]
    assert any("no node has rank 3" in e for e in errors)


def test_every_problem_is_reported_not_just_the_first():
    cluster = nodes(**{"2__roce_ipv4": "bad", "3__spark_rank": 0})
    errors = _inventory.check_cluster(cluster, engine(port=22), True)[0]
    assert len(errors) >= 3


@pytest.mark.parametrize(
    ("host", "key", "warned"),
    [
        ("0.0.0.0", False, True),
        ("0.0.0.0", True, False),
        ("127.0.0.1", False, False),
        ("localhost", False, False),
    ],
)
def test_an_open_api_without_a_key_is_a_loud_warning(host, key, warned):
    warnings = _inventory.check_cluster(nodes(), engine(host=host), api_key_set=key)[1]
    assert any("ANYONE ON THAT NETWORK" in w for w in warnings) is warned


def test_bootstrap_on_the_roce_nic_is_a_warning_naming_pitfall_1():
    cluster = nodes(**{f"{i}__sglang_nccl_socket_ifname": "enp1s0f0np0" for i in range(1, 5)})
    warnings = _inventory.check_cluster(cluster, ENGINE, True)[1]
    assert any("Pitfall 1" in w for w in warnings)


def test_no_hosts():
    errors, _warnings, ranks = _inventory.check_cluster([], ENGINE)
    assert ranks == {}
    assert "spark_nodes has no hosts" in errors[0]
