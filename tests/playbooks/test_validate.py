"""playbooks/validate.yml on a table of bad inventories.

Each inventory is a copy of a good 4-node cluster folder with one mistake. The
playbook must fail with a message naming the host, the variable and the fix, and
must not try to reach any node: the hosts' addresses are on loopback (127.0.3.0/24,
where no sshd answers: traffic stays on this machine), and their connection is ssh with a
1 s timeout, so any attempt shows up as an unreachable host.
"""

from __future__ import annotations

import copy
import os
import subprocess

import pytest
import yaml
from _forked_cli import ForkedCli, python_of

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PLAYBOOK = os.path.join(REPO, "playbooks", "validate.yml")

GOOD_HOSTS = {
    f"spark-{i + 1}": {
        "spark_rank": i,
        "ansible_host": f"127.0.3.{10 * i + 3}",
        "roce_ipv4": f"10.0.30.{i + 1}",
    }
    for i in range(4)
}
GOOD_GROUP = {
    "ansible_connection": "ssh",
    "ansible_ssh_timeout": 1,
    "spark_mgmt_iface": "enP7s7",
    "spark_mgmt_subnet": "127.0.3.0/24",
    "roce_iface": "enp1s0f0np0",
    "roce_hca": "rocep1s0f0",
    "roce_subnet": "10.0.30.0/24",
    "roce_mtu": 9000,
    "sglang_profile": "qwen38_27b_tp4_dflash2",
    # The preset leaves the main weights' revision to the cluster (validate refuses it unset).
    "sglang_profile_overrides": {"model_revision": "0123456789abcdef0123456789abcdef01234567"},
    "sglang_api_key": "k",
}


def write_inventory(root, hosts, group, host_extra=None):
    os.makedirs(os.path.join(root, "group_vars"), exist_ok=True)
    with open(os.path.join(root, "hosts.yml"), "w", encoding="utf-8") as handle:
        yaml.safe_dump({"spark_nodes": {"hosts": hosts}}, handle)
    with open(os.path.join(root, "group_vars", "spark_nodes.yml"), "w", encoding="utf-8") as handle:
        yaml.safe_dump(group, handle)
    for host, values in (host_extra or {}).items():
        os.makedirs(os.path.join(root, "host_vars"), exist_ok=True)
        with open(os.path.join(root, "host_vars", f"{host}.yml"), "w", encoding="utf-8") as handle:
            yaml.safe_dump(values, handle)


_BIN = os.path.join(REPO, ".venv", "bin", "ansible-playbook")
_BASE_ENV = {
    "ANSIBLE_CONFIG": os.path.join(REPO, "ansible.cfg"),
    "ANSIBLE_COLLECTIONS_PATH": os.path.join(REPO, ".collections"),
    "ANSIBLE_NOCOLOR": "1",
}
# One process imports ansible once; each run is a child forked from it (_forked_cli.py).
_CLI = ForkedCli(python_of(_BIN), _BIN)


def run_playbook(inventory, playbook, *args, **env_extra):
    """ansible-playbook of this checkout with its config and collection path."""
    env = dict(os.environ, **_BASE_ENV, **env_extra)
    return _CLI.run(["-i", inventory, playbook, *args], env)


def run_validate(inventory):
    return run_playbook(inventory, PLAYBOOK)


def mutate(hosts=None, group=None, host_extra=None):
    h, g = copy.deepcopy(GOOD_HOSTS), copy.deepcopy(GOOD_GROUP)
    for host, values in (hosts or {}).items():
        if values is None:
            del h[host]
        else:
            for key, value in values.items():
                if value is None:
                    h[host].pop(key, None)
                else:
                    h[host][key] = value
    g.update(group or {})
    return h, g, host_extra or {}


CASES = {
    "duplicate rank": (
        mutate(hosts={"spark-3": {"spark_rank": 1}}),
        ["spark-3: spark_rank 1 is also the rank of spark-2", "fix:"],
    ),
    "gap in ranks": (
        mutate(hosts={"spark-4": {"spark_rank": 4}}),
        ["spark-4: spark_rank 4 is out of range for 4 nodes", "no node has rank 3"],
    ),
    "rank missing": (
        mutate(hosts={"spark-2": {"spark_rank": None}}),
        ["spark-2: spark_rank is not set", "fix: give every node a rank"],
    ),
    "rank not an integer": (
        mutate(hosts={"spark-2": {"spark_rank": "one"}}),
        ["spark-2: spark_rank is 'one', not a non-negative integer"],
    ),
    "no head": (
        mutate(hosts={f"spark-{i + 1}": {"spark_rank": i + 1} for i in range(4)}),
        ["spark_rank 0 (the head) is missing", "give exactly one node spark_rank: 0"],
    ),
    "nodes and nnodes disagree": (
        mutate(hosts={"spark-4": None}),
        [
            "sglang_engine.nnodes is 4 but spark_nodes has 3 nodes; fix: set "
            "sglang_profile_overrides.nnodes to 3 and, with it, tp_size x pp_size to 3"
        ],
    ),
    "tp x pp does not fit the nodes": (
        mutate(group={"sglang_profile_overrides": {"tp_size": 8}}),
        ["sglang_engine.tp_size x pp_size = 8, but 4 nodes x 1 GPU = 4"],
    ),
    "invalid management address": (
        mutate(hosts={"spark-2": {"ansible_host": "127.0.3.300"}}),
        ["spark-2: ansible_host is '127.0.3.300', not an IPv4 address"],
    ),
    "duplicate data-plane address": (
        mutate(hosts={"spark-4": {"roce_ipv4": "10.0.30.3"}}),
        ["spark-4: roce_ipv4 10.0.30.3 is also used by spark-3"],
    ),
    "data-plane address outside its subnet": (
        mutate(hosts={"spark-2": {"roce_ipv4": "10.0.31.2"}}),
        ["spark-2: roce_ipv4 10.0.31.2 is not a host address of roce_subnet 10.0.30.0/24"],
    ),
    "management address outside its subnet": (
        mutate(hosts={"spark-1": {"ansible_host": "198.51.100.3"}}),
        ["spark-1: ansible_host 198.51.100.3 is not a host address of spark_mgmt_subnet"],
    ),
    "data-plane NIC missing": (
        mutate(group={"roce_iface": ""}),
        ["roce_iface is '', not a network interface name", "fix: name the NIC"],
    ),
    "HCA missing": (
        mutate(group={"roce_hca": ""}),
        ["roce_hca is '', not an RDMA device name"],
    ),
    "MTU below jumbo": (
        mutate(group={"roce_mtu": 1500}),
        ["roce_mtu is 1500", "RoCE needs jumbo frames"],
    ),
    "API port clashes with the rendezvous": (
        mutate(group={"sglang_profile_overrides": {"port": 23000}}),
        ["sglang_engine.dist_init_port 23000 clashes with the API port"],
    ),
    "extra_args fights a derived flag": (
        mutate(
            group={
                "sglang_profile_overrides": {"extra_args": ["--dist-init-addr", "10.0.30.9:23000"]}
            }
        ),
        ["sglang_engine.extra_args contains --dist-init-addr", "derived from rank 0's roce_ipv4"],
    ),
    "DeepSeek-V4 with a speculative algorithm it rejects": (
        mutate(
            hosts={"spark-3": None, "spark-4": None},
            group={
                "sglang_profile": "ds4f_flash0731_tp2_c_eagle",
                "sglang_profile_overrides": {
                    "image": "lmsysorg/sglang@sha256:" + "6f91b6bbe3" + "0" * 54,
                    "model_revision": None,
                    "speculative": {"algorithm": "NEXTN"},
                },
            },
        ),
        [
            "sglang_engine.speculative.algorithm is NEXTN, which DeepSeek-V4 does not accept",
            "EAGLE",
        ],
    ),
    "clamp not above the draft window": (
        mutate(group={"sglang_profile_overrides": {"min_new_tokens": 8}}),
        ["sglang_engine.min_new_tokens 8 does not exceed the speculative window (8 tokens)"],
    ),
    "speculative decoding without the clamp": (
        mutate(
            group={
                "sglang_profile_overrides": {
                    "patches": [
                        {
                            "file": "/sgl-workspace/sglang/python/sglang/srt/utils/watchdog.py",
                            "apply": ["watchdog_stack_dump"],
                        }
                    ]
                }
            }
        ),
        ["sglang_engine.patches lack max_tokens_clamp", "Pitfall 3"],
    ),
    "truncated image and revision pins (the DS4-F preset as recorded)": (
        mutate(
            hosts={"spark-3": None, "spark-4": None},
            group={
                "sglang_profile": "ds4f_flash0731_tp2_a_graphs_off",
                "sglang_profile_overrides": {},
            },
        ),
        [
            "sglang_engine.image 'lmsysorg/sglang@sha256:6f91b6bbe3' carries a truncated digest",
            "sglang_engine.model_revision '9e165c30' looks like a truncated commit",
        ],
    ),
    # Issue 44: what site.yml refused only after the roce stage had changed the nodes.
    "the main weights' revision left unset (the example inventory as shipped)": (
        mutate(group={"sglang_profile_overrides": {}}),
        ["spark-1: sglang_engine.model_revision is not set; fix: pin it"],
    ),
    "the RoCE NIC and HCA given in each other's place": (
        mutate(group={"roce_iface": "roceP2p1s0f0", "roce_hca": "enP2p1s0f0np0"}),
        [
            "spark-1: roce_iface/roce_hca are swapped",
            "fix: set roce_iface: enP2p1s0f0np0 and roce_hca: roceP2p1s0f0",
        ],
    ),
    "a cluster-wide variable set per host": (
        mutate(host_extra={"spark-3": {"roce_subnet": "10.0.31.0/24", "roce_ipv4": "10.0.31.3"}}),
        ["spark-3: roce_subnet differs from spark-1's", "set it once in group_vars/spark_nodes"],
    ),
    "unknown profile field": (
        mutate(group={"sglang_profile_overrides": {"tp_sise": 4}}),
        [
            "spark-1, spark-2, spark-3, spark-4: sglang_profile_overrides.tp_sise is not a "
            "profile field (did you mean tp_size?); fix:"
        ],
    ),
    "unknown nested profile field": (
        mutate(group={"sglang_profile_overrides": {"container": {"shm_sise": "1g"}}}),
        [
            "sglang_profile_overrides.container.shm_sise is not a profile field "
            "(did you mean shm_size?)"
        ],
    ),
    "profile field of the wrong type": (
        mutate(group={"sglang_profile_overrides": {"port": "eighty"}}),
        ["sglang_profile_overrides gives a profile that does not fit the schema", "port"],
    ),
    "misspelt profile name": (
        mutate(group={"sglang_profile": "qwen38_27b_tp4_dflash"}),
        [
            "spark-1, spark-2, spark-3, spark-4: sglang_profile 'qwen38_27b_tp4_dflash' is not "
            "a shipped preset (did you mean qwen38_27b_tp4_dflash2?); fix: use one of"
        ],
    ),
    "profile misspelt on one host only": (
        mutate(host_extra={"spark-2": {"sglang_profile": "qwen38_27b_tp4_dflsh2"}}),
        ["spark-2: sglang_profile 'qwen38_27b_tp4_dflsh2' is not a shipped preset"],
    ),
    "profile file given by a relative path": (
        mutate(group={"sglang_profile": "profiles/mine.yml"}),
        ["sglang_profile 'profiles/mine.yml' is a relative path; fix: give its absolute path"],
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_inventory_fails_offline_with_its_message(case, tmp_path):
    (hosts, group, host_extra), expected = CASES[case]
    write_inventory(str(tmp_path), hosts, group, host_extra)
    result = run_validate(str(tmp_path))
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    for text in expected:
        assert text in output, f"{case}: {text!r} not in output:\n{output}"
    assert "UNREACHABLE" not in output, output
    assert "unreachable=1" not in output


def test_good_inventory_passes_offline(tmp_path):
    hosts, group, host_extra = mutate()
    write_inventory(str(tmp_path), hosts, group, host_extra)
    result = run_validate(str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "unreachable=0" in result.stdout
    assert "failed=0" in result.stdout


def test_a_passing_validate_ends_with_one_summary(tmp_path):
    hosts, group, host_extra = mutate(group={"cluster_name": "rack7"})
    write_inventory(str(tmp_path), hosts, group, host_extra)
    result = run_validate(str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    # The callback may fold long lines: compare with whitespace collapsed.
    tail = " ".join(result.stdout.rsplit("TASK [Summarise what was checked]", 1)[1].split())
    for text in (
        "cluster rack7: 4 node(s), head spark-1",
        "profile qwen38_27b_tp4_dflash2: qwen3.8-27b (TP 4 on 4 node(s))",
        "RadixArk/Qwen3.8-27B-NVFP4-BF16-LMHead@0123456789abcdef0123456789abcdef01234567",
        "from https://hf-mirror.com (HF token: not set)",
        "rank 3 spark-4: ssh 127.0.3.33, bootstrap enP7s7, RoCE enp1s0f0np0/rocep1s0f0 10.0.30.4",
    ):
        assert text in tail, tail


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        # One run: each playbook's own refusals are unit tests of run_problems (test__inventory).
        (["-e", "preflight_playbook=upgrade"], "upgrade_image is not set"),
    ],
)
def test_validate_checks_what_another_playbook_would_refuse(args, expected, tmp_path):
    hosts, group, host_extra = mutate(group={"cluster_name": "rack7"})
    write_inventory(str(tmp_path), hosts, group, host_extra)
    result = run_playbook(str(tmp_path), PLAYBOOK, *args)
    output = result.stdout + result.stderr
    assert result.returncode != 0 and expected in output, output
    assert "unreachable=1" not in output


@pytest.mark.parametrize(
    ("playbook", "expected"),
    [
        # One run; that every playbook names itself to the checks is read from the files below.
        ("drill", "-e drill_confirm=rack7 (drill_confirm is not set)"),
    ],
)
def test_each_playbook_refuses_its_missing_variable_before_it_connects(
    playbook, expected, tmp_path
):
    hosts, group, host_extra = mutate(group={"cluster_name": "rack7"})
    write_inventory(str(tmp_path), hosts, group, host_extra)
    result = run_playbook(str(tmp_path), os.path.join(REPO, "playbooks", f"{playbook}.yml"))
    output = result.stdout + result.stderr
    assert result.returncode != 0 and expected in output, output
    assert "UNREACHABLE" not in output and "unreachable=1" not in output, output


PLAYBOOKS = os.path.join(REPO, "playbooks")


def test_every_playbook_names_itself_to_the_inventory_checks():
    """Its own offline refusals (run_problems) run only for the name its preflight play gives."""
    for name in sorted(os.listdir(PLAYBOOKS)):
        stem = name[: -len(".yml")]
        if stem in ("nodes", "validate", "site", "restart"):  # site: the default; restart: site's
            continue
        with open(os.path.join(PLAYBOOKS, name), encoding="utf-8") as handle:
            plays = yaml.safe_load(handle)
        named = [
            (role.get("vars") or {}).get("preflight_playbook")
            for play in plays
            for role in play.get("roles") or []
            if isinstance(role, dict) and role.get("role") == "sparkfleet.serving.preflight"
        ]
        assert named[:1] == [stem], f"{name}: its first preflight play names {named[:1]}"


@pytest.mark.parametrize(
    ("password", "expected"),
    [(None, "no vault password was given"), ("wrong", "the password given does not open it")],
)
def test_an_unreadable_vault_names_the_file_and_the_flag(password, expected, tmp_path):
    hosts, group, host_extra = mutate()
    write_inventory(str(tmp_path), hosts, group, host_extra)
    # The group's own file, vaulted whole (group_vars/all is read for the controller's first
    # play too, where Ansible's own words are all there is: docs/real-cluster.md).
    secrets = tmp_path / "group_vars" / "spark_nodes.yml"
    (tmp_path / "right").write_text("right\n", encoding="utf-8")
    subprocess.run(
        [
            os.path.join(REPO, ".venv", "bin", "ansible-vault"),
            "encrypt",
            "--vault-password-file",
            str(tmp_path / "right"),
            str(secrets),
        ],
        check=True,
        capture_output=True,
    )
    args = []
    if password:
        (tmp_path / "pw").write_text(password + "\n", encoding="utf-8")
        args = ["--vault-password-file", str(tmp_path / "pw")]
    result = run_playbook(str(tmp_path), PLAYBOOK, *args)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert f"{secrets} is vaulted and {expected}" in output, output
    assert "--ask-vault-pass" in output
    good = run_playbook(str(tmp_path), PLAYBOOK, "--vault-password-file", str(tmp_path / "right"))
    assert good.returncode == 0, good.stdout + good.stderr


def test_open_api_without_key_is_a_loud_warning(tmp_path):
    hosts, group, host_extra = mutate(group={"sglang_api_key": ""})
    write_inventory(str(tmp_path), hosts, group, host_extra)
    result = run_validate(str(tmp_path))
    assert result.returncode == 0
    assert "ANYONE ON THAT NETWORK CAN USE THE MODEL" in result.stdout + result.stderr


@pytest.mark.parametrize(
    "group",
    [
        {"sglang_profile": "qwen38_27b_tp4_dflash"},
        {"sglang_profile_overrides": {"tp_sise": 4}},
        {"sglang_profile_overrides": ["port", 8090]},
        {"sglang_profile_overrides": 8090},
    ],
)
def test_a_cluster_wide_profile_error_is_one_short_message(group, tmp_path):
    hosts, good, host_extra = mutate(group=group)
    write_inventory(str(tmp_path), hosts, good, host_extra)
    result = run_validate(str(tmp_path))
    output = result.stdout + result.stderr
    assert result.returncode != 0
    # one failed task on one host, no argument-spec dump
    assert output.count("fatal:") == 1, output
    assert output.count("failed=1") == 1 and "failed=2" not in output, output
    assert "argument_spec_data" not in output and "Supported parameters" not in output
    assert len(output.splitlines()) < 60, output


def test_a_site_profile_file_with_its_own_data_dir_validates(tmp_path):
    profile = tmp_path / "profiles" / "mine.yml"
    profile.parent.mkdir()
    profile.write_text(
        yaml.safe_dump(
            {"base": "qwen38_27b_tp4_dflash2", "data_dir": "/srv/ai", "served_model_name": "mine"}
        ),
        encoding="utf-8",
    )
    hosts, group, host_extra = mutate(group={"sglang_profile": str(profile)})
    inventory = tmp_path / "inventory"
    write_inventory(str(inventory), hosts, group, host_extra)
    result = run_validate(str(inventory))
    assert result.returncode == 0, result.stdout + result.stderr
    profile.write_text(
        yaml.safe_dump({"base": "qwen38_27b_tp4_dflash2", "prot": 1}), encoding="utf-8"
    )
    result = run_validate(str(inventory))
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert (
        f"sglang_profile file {profile}: prot is not a profile field (did you mean port?)" in output
    )
