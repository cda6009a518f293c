"""Offline inventory checks: one mistake per case, one message naming host, variable, fix."""

from __future__ import annotations

import copy
import glob
import os
import re

import pytest
import yaml

from ansible_collections.sparkfleet.serving.plugins.plugin_utils import (
    _inventory,
    _inventory_read,
    _inventory_report,
    _inventory_run,
)

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


# One mistake per case: the cluster, the profile, and a line of the message (None: no error).
PROBLEM_CASES = [
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
    (
        nodes(**{"1__watchdog_bin": "sparkfleet-watchdog"}),
        ENGINE,
        "spark-1: watchdog_bin is 'sparkfleet-watchdog', not an absolute file path; fix: give "
        "an absolute path",
    ),
    (
        nodes(
            **{
                "1__sglang_node_bin": "/usr/local/sbin/sparkfleet",
                "1__cluster_production_bin": "/usr/local/sbin/sparkfleet",
            }
        ),
        ENGINE,
        "spark-1: cluster_production_bin is '/usr/local/sbin/sparkfleet', the same file as "
        "sglang_node_bin",
    ),
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
    (
        nodes(),
        engine(model_revision="main"),
        "spark-1: sglang_engine.model_revision 'main' is not a commit but a branch or tag "
        "name, which moves; fix: set sglang_profile_overrides.model_revision to the full "
        "40-character commit sha",
    ),
    (nodes(), engine(model_revision="a" * 40), None),
    (nodes(), engine(model_revision=None), None),
    (nodes(), engine(model_revision="A" * 40), "is not a 40-character lowercase commit sha"),
    (nodes(), engine(model_revision="a" * 41), "is not a 40-character lowercase commit sha"),
    (
        nodes(),
        engine(speculative={"algorithm": None, "draft_model_revision": "refs/pr/1"}),
        "sglang_engine.speculative.draft_model_revision 'refs/pr/1' is not a commit but a "
        "branch or tag name",
    ),
    (
        nodes(),
        engine(hf_endpoint="hf-mirror.com"),
        "spark-1: sglang_engine.hf_endpoint 'hf-mirror.com' is not an http(s) URL (it has no "
        "scheme); fix: set sglang_profile_overrides.hf_endpoint to the mirror's URL",
    ),
    (nodes(), engine(hf_endpoint="http://192.168.3.250:8090"), None),
    (nodes(), engine(hf_endpoint=None), None),
    (
        nodes(**{"2__model_weights_hf_endpoint": "mirror:8090"}),
        ENGINE,
        "spark-2: model_weights_hf_endpoint 'mirror:8090' is not an http(s) URL",
    ),
    (
        nodes(**{f"{i}__model_weights_hf_endpoint": "https://" for i in range(1, 5)}),
        ENGINE,
        "spark-1, spark-2, spark-3, spark-4: model_weights_hf_endpoint 'https://' names no host",
    ),
    (nodes(**{"3__model_weights_hf_endpoint": "https://hf.example/"}), ENGINE, None),
    (
        nodes(),
        engine(data_dir="srv/ai"),
        "spark-1: sglang_engine.data_dir 'srv/ai' is a relative path",
    ),
    (nodes(), engine(data_dir="/srv/ai"), None),
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
]


@pytest.mark.parametrize(("cluster", "eng", "message"), PROBLEM_CASES)
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


REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))


def _load(path):
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


DECLARED = _inventory_read.read_declared_variables()


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        (
            {h: ["roce_mut"] for h in ("spark-1", "spark-2")},
            [
                "spark-1, spark-2: roce_mut is not a variable of any role of sparkfleet.serving "
                "(did you mean roce_mtu?), so nothing reads it; fix: rename it to roce_mtu"
            ],
        ),
        (
            {"spark-3": ["sglang_profile_override"], "spark-1": ["sglang_profile_overrides"]},
            [
                "spark-3: sglang_profile_override is not a variable of any role of "
                "sparkfleet.serving (did you mean sglang_profile_overrides?), so nothing reads "
                "it; fix: rename it to sglang_profile_overrides"
            ],
        ),
        (
            {"spark-1": ["canary_zzz_qqq"]},
            [
                "spark-1: canary_zzz_qqq is not a variable of any role of sparkfleet.serving, so "
                "nothing reads it; fix: correct or remove it; each role's variables: ansible-doc "
                "-t role sparkfleet.serving.<role>"
            ],
        ),
        # Not the collection's prefixes, internal facts, profile fields at top level are not
        # variables of any role either: only the prefixed names are judged.
        ({"spark-1": ["ansible_host", "sparksim_cluster", "__sglang_preset", "tp_size"]}, []),
        # Declared in some role, any entry point (preflight's host, watchdog's control).
        ({"spark-1": ["preflight_ping_timeout_s", "watchdog_grace_s", "sglang_node_bin"]}, []),
    ],
)
def test_an_undeclared_prefixed_variable_is_named_with_the_closest(names, expected):
    assert _inventory_read.unknown_variables(names, DECLARED) == expected


def test_profile_fields_are_not_variables():
    # The sglang role's entry point profile documents profile fields (set in
    # sglang_profile_overrides), not variables: sglang_version at top level is a mistake.
    assert "sglang_version" not in DECLARED
    assert _inventory_read.unknown_variables({"spark-1": ["sglang_version"]}, DECLARED)
    assert "roce_mtu" in DECLARED and "model_weights_hf_endpoint" in DECLARED


def test_declared_variables_from_the_register(tmp_path):
    # Every variable of the register, with the roles that read it (owner first); a partial
    # copy of the collection without the register judges nothing.
    assert DECLARED["roce_mtu"][0] == "cluster" and "roce" in DECLARED["roce_mtu"]
    assert "sglang_engine" in DECLARED and DECLARED["sglang_engine"][0] == "sglang"
    assert _inventory_read.read_declared_variables(str(tmp_path)) == {}


def _inventory_names():
    """Every variable name a shipped inventory, twin or molecule extra-vars file sets."""
    names = set()
    paths = glob.glob(os.path.join(REPO, "inventory", "*", "**", "*.yml"), recursive=True)
    paths += glob.glob(os.path.join(REPO, "molecule", "*", "speculative.yml"))
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        if text.startswith("$ANSIBLE_VAULT"):
            continue
        data = yaml.safe_load(text) or {}
        if os.path.basename(path) == "hosts.yml":
            for group in data.values():
                for host_vars in (group.get("hosts") or {}).values():
                    names |= set(host_vars or {})
                names |= set(group.get("vars") or {})
        else:
            names |= set(data)
    # -e name=value and --extra-vars=name=value in molecule scenarios, tools and playbooks
    for path in glob.glob(
        os.path.join(REPO, "molecule", "**", "*.yml"), recursive=True
    ) + glob.glob(os.path.join(REPO, "playbooks", "*.yml")):
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        names |= set(re.findall(r"(?:-e |--extra-vars=)([a-z_]+)=", text))
        names |= set(re.findall(r"-e '\{\{ \{\"([a-z_]+)\"", text))
    return names


def test_shipped_inventories_and_extra_vars_use_only_declared_variables():
    names = _inventory_names()
    # the harvest found the variables it should (the test would pass on nothing otherwise)
    assert {
        "roce_mtu",
        "sglang_profile_overrides",
        "watchdog_grace_s",
        "canary_production",
    } <= names
    assert {"model_weights_enabled", "canary_restore", "canary_results_dir"} <= names
    assert _inventory_read.unknown_variables({"any": sorted(names)}, DECLARED) == []


def test_no_nodes_names_the_sources_the_groups_and_the_renaming(tmp_path):
    error = _inventory_read.no_nodes_error(
        "spark_nodes",
        [str(tmp_path)],
        {"all": ["spark-1", "spark-2"], "ungrouped": [], "sparks": ["spark-1", "spark-2"]},
    )
    assert error == (
        f"cluster: spark_nodes has no hosts in the inventory read from {tmp_path}; groups "
        "found: sparks (spark-1, spark-2); fix: rename the group sparks to spark_nodes"
    )


def test_no_nodes_names_a_file_that_does_not_parse(tmp_path):
    hosts = tmp_path / "hosts.yml"
    error = _inventory_read.no_nodes_error(
        "spark_nodes", [str(tmp_path)], {"all": [], "ungrouped": []}, [(str(hosts), "bad key")]
    )
    assert (
        f"it has no hosts at all; Ansible could not parse {hosts}: bad key; fix: correct {hosts}"
        in error
    )


def test_no_nodes_names_a_source_that_does_not_exist(tmp_path):
    error = _inventory_read.no_nodes_error(
        "spark_nodes", [str(tmp_path / "nope")], {"all": [], "ungrouped": []}
    )
    assert f"read from {tmp_path / 'nope'} (which does not exist)" in error
    assert "fix: name the cluster's folder: -i inventory/<cluster>" in error


def test_no_nodes_lists_hosts_in_no_group_and_other_groups(tmp_path):
    error = _inventory_read.no_nodes_error(
        "spark_nodes",
        [str(tmp_path)],
        {"all": ["a", "b"], "ungrouped": ["a"], "gpu": ["b"], "spark_nodes": []},
    )
    assert "groups found: gpu (b); hosts in no group (a); fix: list the Sparks under" in error


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("https://hf-mirror.com", None),
        ("http://192.168.3.250:8090/", None),
        ("hf-mirror.com", "'hf-mirror.com' is not an http(s) URL (it has no scheme)"),
        ("ftp://mirror", "'ftp://mirror' is not an http(s) URL"),
        ("http://", "'http://' names no host"),
        ("http://[::1", "'http://[::1' is not a URL"),
    ],
)
def test_url_problem(value, problem):
    found = _inventory_report.url_problem(value)
    if problem is None:
        assert found is None
    else:
        assert found.startswith(problem), found


def both_halves(count=4):
    """Every node with both functions of its 200G port (roce_hcas)."""
    out = nodes(count)
    for i, node in enumerate(out):
        node["roce_hcas"] = [
            {"hca": "rocep1s0f0", "iface": "enp1s0f0np0", "ipv4": f"10.0.30.{i + 1}",
             "subnet": "10.0.30.0/24"},
            {"hca": "roceP2p1s0f0", "iface": "enP2p1s0f0np0", "ipv4": f"10.0.31.{i + 1}",
             "subnet": "10.0.31.0/24"},
        ]  # fmt: skip
    return out


def test_both_halves_of_the_port_are_a_good_cluster():
    errors, _warnings, _ranks = _inventory.check_cluster(both_halves(), ENGINE, api_key_set=True)
    assert errors == []


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c: c[1]["roce_hcas"][1].update(ipv4="10.0.32.2"),
         "spark-2: roce_hcas entry 2 ipv4 10.0.32.2 is not a host address of 10.0.31.0/24"),
        (lambda c: c[1]["roce_hcas"][1].update(ipv4="10.0.31.1"),
         "spark-2: roce_hcas entry 2 ipv4 10.0.31.1 is also used by spark-1 (roce_hcas entry 2)"),
        (lambda c: c[2]["roce_hcas"][0].update(hca="roceP2p1s0f0"),
         "spark-3: roce_hcas entry 1 has hca 'roceP2p1s0f0', but roce_hca is 'rocep1s0f0'"),
        (lambda c: c[2]["roce_hcas"][1].update(iface="enp1s0f0np0"),
         "spark-3: roce_hcas names iface enp1s0f0np0 twice"),
        (lambda c: c[0]["roce_hcas"][1].pop("subnet"),
         "spark-1: roce_hcas entry 2 lacks subnet; fix: list each function as"),
        (lambda c: c[0]["roce_hcas"][1].update(subnet="10.0.30.128/25", ipv4="10.0.30.130"),
         "spark-1: roce_hcas subnets 10.0.30.0/24 and 10.0.30.128/25 overlap"),
        (lambda c: c[3].pop("roce_hcas"),
         "spark-4: roce_hcas gives the subnets 10.0.30.0/24, spark-1 gives 10.0.30.0/24, "
         "10.0.31.0/24"),
        (lambda c: c[3].update(roce_hcas="roceP2p1s0f0"),
         "spark-4: roce_hcas is 'roceP2p1s0f0', not a list of mappings"),
        (lambda c: c[1]["roce_hcas"][1].update(subnet="192.168.3.128/25", ipv4="192.168.3.130"),
         "spark-2: roce_hcas entry 2 subnet 192.168.3.128/25 overlaps spark_mgmt_subnet"),
    ],
    ids=["outside", "taken", "first-differs", "iface-twice", "lacks", "overlap", "one-node-single",
         "not-a-list", "mgmt"],
)  # fmt: skip
def test_each_problem_of_roce_hcas_is_named(change, message):
    cluster = both_halves()
    change(cluster)
    errors, _warnings, _ranks = _inventory.check_cluster(cluster, ENGINE)
    assert any(message in e for e in errors), errors


# Issue 44: what site.yml and the other playbooks would refuse without a node, refused offline.
WEIGHTS_ENGINE = engine(
    model_repo="org/Model",
    model_revision="0123456789abcdef0123456789abcdef01234567",
    model_path="/home/tiger/models/org/Model",
    hf_endpoint="https://hf-mirror.com",
    container={"volumes": ["/home/tiger/models:/home/tiger/models"]},
)


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"model_revision": None}, "sglang_engine.model_revision is not set"),
        ({"model_revision": ""}, "sglang_engine.model_revision is not set"),
        ({"model_revision": "0" * 40}, "is a placeholder, not a revision"),
        ({"model_revision": "<40-hex commit>"}, "is a placeholder, not a revision"),
        ({"model_revision": "TODO"}, "is a placeholder, not a revision"),
        ({"model_path": "/elsewhere/m"}, "is not under any of the profile's container volumes"),
        (
            {"speculative": {"draft_model_path": "org/Draft", "algorithm": "EAGLE"}},
            "sglang_engine.speculative.draft_model_revision is not set",
        ),
    ],
)
def test_what_the_weights_stage_refuses_is_refused_offline(changes, expected):
    eng = copy.deepcopy(WEIGHTS_ENGINE)
    eng.update(changes)
    errors, _w, _r = _inventory.check_cluster(nodes(), eng, api_key_set=True, weights=True)
    assert any(expected in e and e.startswith("spark-1: ") for e in errors), errors
    assert all("fix:" in e for e in errors), errors


def test_a_pinned_profile_passes_and_the_weights_checks_follow_model_weights_enabled():
    errors, _w, _r = _inventory.check_cluster(
        nodes(), WEIGHTS_ENGINE, api_key_set=True, weights=True
    )
    assert errors == []
    unpinned = dict(WEIGHTS_ENGINE, model_revision=None)
    errors, _w, _r = _inventory.check_cluster(nodes(), unpinned, api_key_set=True, weights=False)
    assert errors == []


def test_a_set_but_bad_pin_is_named_once():
    eng = dict(WEIGHTS_ENGINE, model_revision="main")
    errors, _w, _r = _inventory.check_cluster(nodes(), eng, api_key_set=True, weights=True)
    assert len([e for e in errors if "model_revision" in e]) == 1, errors


@pytest.mark.parametrize(
    ("changes", "variable", "fix"),
    [
        (
            {"1__roce_iface": "roceP2p1s0f0", "1__roce_hca": "enP2p1s0f0np0"},
            "roce_iface/roce_hca are swapped",
            "set roce_iface: enP2p1s0f0np0 and roce_hca: roceP2p1s0f0",
        ),
        ({"2__roce_iface": "rocep1s0f0"}, "roce_iface is 'rocep1s0f0', an RDMA device", "netdev"),
        ({"3__roce_hca": "enp1s0f0np0"}, "roce_hca is 'enp1s0f0np0', a network interface", "HCA"),
        ({"1__roce_hca": "eth2"}, "roce_hca is 'eth2', a network interface", "HCA"),
        ({"1__spark_mgmt_iface": "mlx5_0"}, "spark_mgmt_iface is 'mlx5_0', an RDMA", "network"),
    ],
)
def test_a_nic_and_an_hca_in_each_others_place_are_refused(changes, variable, fix):
    errors, _w, _r = _inventory.check_cluster(nodes(**changes), ENGINE, api_key_set=True)
    assert any(variable in e and fix in e.split("fix:", 1)[1] for e in errors), errors


def test_swapped_names_in_roce_hcas_are_refused():
    hcas = [
        {
            "hca": "rocep1s0f0",
            "iface": "enp1s0f0np0",
            "ipv4": "10.0.30.1",
            "subnet": "10.0.30.0/24",
        },
        {
            "hca": "enP2p1s0f0np0",
            "iface": "roceP2p1s0f0",
            "ipv4": "10.0.31.1",
            "subnet": "10.0.31.0/24",
        },
    ]
    errors, _w, _r = _inventory.check_cluster(
        nodes(1, **{"1__roce_hcas": hcas}), engine(nnodes=1, tp_size=1), api_key_set=True
    )
    assert any(
        "entry 2 has iface and hca swapped" in e and "write hca: roceP2p1s0f0" in e for e in errors
    ), errors


@pytest.mark.parametrize(
    ("endpoint", "trusted", "warned"),
    [
        ("https://hf-mirror.com", None, True),
        ("https://hf-mirror.com", ["https://hf-mirror.com"], False),
        ("https://huggingface.co", None, False),
        ("http://127.0.0.1:8090", ["http://127.0.0.1:8091"], True),
    ],
)
def test_a_token_the_mirror_will_not_get_is_a_warning_naming_the_variable(
    endpoint, trusted, warned
):
    nodes_ = nodes(**{f"{i}__sglang_hf_token_endpoints": trusted for i in range(1, 5)})
    eng = engine(hf_endpoint=endpoint)
    errors, warnings, _r = _inventory.check_cluster(
        nodes_, eng, api_key_set=True, hf_token_set=True
    )
    assert errors == []
    found = [w for w in warnings if w.startswith("cluster: sglang_hf_token ")]
    assert bool(found) is warned, warnings
    if warned:
        assert f"will NOT be sent to {endpoint}" in found[0]
        assert "sglang_hf_token_endpoints" in found[0]
    # Without a token there is nothing to withhold.
    assert not _inventory.check_cluster(nodes_, eng, api_key_set=True)[1]


def test_a_weights_endpoint_override_is_what_the_token_check_reads():
    nodes_ = nodes(**{"1__model_weights_hf_endpoint": "https://other.test"})
    _errors, warnings, _r = _inventory.check_cluster(
        nodes_, engine(hf_endpoint="https://huggingface.co"), api_key_set=True, hf_token_set=True
    )
    assert [w for w in warnings if w.startswith("spark-1: sglang_hf_token")], warnings


@pytest.mark.parametrize("trusted", ["https://a.test", ["ftp://a.test"], [""]])
def test_bad_trusted_endpoints_are_refused(trusted):
    nodes_ = nodes(**{f"{i}__sglang_hf_token_endpoints": trusted for i in range(1, 5)})
    errors = _inventory.check_cluster(nodes_, ENGINE, api_key_set=True)[0]
    assert any(e.startswith("cluster: sglang_hf_token_endpoints ") for e in errors), errors


@pytest.mark.parametrize(
    ("playbook", "run", "expected"),
    [
        ("upgrade", {}, "upgrade_image is not set"),
        ("upgrade", {"upgrade_image": "x:1", "upgrade_max_slowdown": 2}, "upgrade_max_slowdown"),
        ("drill", {}, "-e drill_confirm=rack7 (drill_confirm is not set)"),
        ("drill", {"drill_confirm": "rack8"}, "-e drill_confirm=rack7 (drill_confirm is rack8)"),
        ("teardown", {"teardown_confirm": ""}, "-e teardown_confirm=rack7"),
        ("monitoring", {}, "monitoring_prometheus_host is not set"),
        ("monitoring", {"monitoring_prometheus_host": ""}, "monitoring_prometheus_host is not set"),
        ("deploy", {}, "preflight_playbook is 'deploy', not a playbook"),
    ],
)
def test_each_playbook_refuses_its_missing_run_variables_offline(playbook, run, expected):
    problems = _inventory_run.run_problems(playbook, run, "rack7")
    assert any(expected in p and p.startswith("cluster: ") for p in problems), problems


@pytest.mark.parametrize(
    ("playbook", "run"),
    [
        ("site", {}),
        ("upgrade", {"upgrade_image": "sglang:0.5.12"}),
        ("drill", {"drill_confirm": "rack7"}),
        ("drill", {"drill_cleanup_only": "true"}),
        ("teardown", {"teardown_confirm": "rack7"}),
        ("monitoring", {"monitoring_prometheus_host": "prom-1"}),
    ],
)
def test_a_complete_run_passes_the_playbook_checks(playbook, run):
    assert _inventory_run.run_problems(playbook, run, "rack7") == []


def test_the_summary_names_cluster_head_profile_endpoint_revisions_and_functions():
    nodes_ = nodes(2, **{"1__cluster_name": "rack7", "2__cluster_name": "rack7"})
    nodes_[1]["roce_hcas"] = [
        {"hca": "rocep1s0f0", "iface": "enp1s0f0np0", "ipv4": "10.0.30.2", "subnet": "a"},
        {"hca": "roceP2p1s0f0", "iface": "enP2p1s0f0np0", "ipv4": "10.0.31.2", "subnet": "b"},
    ]
    eng = dict(WEIGHTS_ENGINE, nnodes=2, tp_size=2)
    lines = _inventory.cluster_summary(
        nodes_, {"spark-1": 0, "spark-2": 1}, eng, "site", hf_token_set=True, warnings=["w"]
    )
    text = "\n".join(lines)
    assert lines[0].startswith("cluster rack7: 2 node(s), head spark-1")
    assert "ansible-playbook sparkfleet.serving.site -i <inventory>" in lines[0]
    assert "profile qwen38_27b_tp4_dflash2: qwen3.8-27b (TP 2 on 2 node(s))" in text
    assert "weights org/Model@0123456789abcdef0123456789abcdef01234567" in text
    assert "from https://hf-mirror.com (HF token: set, NOT sent there" in text
    assert (
        "rank 0 spark-1: ssh 192.168.3.3, bootstrap enP7s7, RoCE enp1s0f0np0/rocep1s0f0 10.0.30.1"
        in text
    )
    assert "RoCE enp1s0f0np0/rocep1s0f0 10.0.30.2, enP2p1s0f0np0/roceP2p1s0f0 10.0.31.2" in text
    assert lines[-1] == "1 warning(s) above"
