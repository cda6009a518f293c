"""Issue 21 (4): what an inventory gets wrong is refused offline, in the first play.

Each inventory below has one mistake that used to pass playbooks/validate.yml (exit 0),
and that site.yml then met only after the roce stage had changed MTU and netplan on every
node, or never (a misspelt variable is ignored). Now validate.yml fails naming the host,
the variable and the fix, and site.yml fails in its inventory checks, before any task on a
node: the hosts are on loopback (no sshd there) with a 1 s ssh timeout (the harness of
test_validate.py), so a task that tried to reach one would show as unreachable, and the
run's JSON record lists every play that started.
"""

from __future__ import annotations

import json
import os
import pathlib

import pytest
import yaml
from test_validate import REPO, mutate, run_playbook, write_inventory

VALIDATE = os.path.join(REPO, "playbooks", "validate.yml")
# The plays that run before anything on a node: the one on localhost that finds the
# nodes, then site.yml's inventory checks (controller only).
FIRST_PLAYS = {
    "Find the cluster's nodes in the inventory (offline)",
    "Check the inventory before touching any node",
}
ROLES = os.path.join(REPO, "roles")
# The inventory checks' own tasks (they run on the controller; site.yml runs them first in
# its stage play, validate.yml in a play of their own): every other task may touch a node.
CHECK_FILES = ("preflight/tasks/main.yml", "sglang/tasks/main.yml", "sglang/tasks/resolve.yml")


def _task_names(items):
    for task in items or []:
        if task.get("name"):
            yield task["name"]
        for section in ("block", "rescue", "always"):
            yield from _task_names(task.get(section))


CHECK_TASKS = {
    name
    for path in CHECK_FILES
    for name in _task_names(yaml.safe_load(pathlib.Path(ROLES, path).read_text(encoding="utf-8")))
}


def _is_check(task_name):
    name = task_name.split(" : ", 1)[-1]
    return name in CHECK_TASKS or name.startswith("Validating arguments against arg spec")


HOSTS = ("spark-1", "spark-2", "spark-3", "spark-4")


def misnamed_group(root):
    hosts, group, host_extra = mutate()
    write_inventory(root, hosts, group, host_extra)
    with open(os.path.join(root, "hosts.yml"), "w", encoding="utf-8") as handle:
        yaml.safe_dump({"sparks": {"hosts": hosts}}, handle)


def hosts_yml_that_does_not_parse(root):
    hosts, group, host_extra = mutate()
    write_inventory(root, hosts, group, host_extra)
    with open(os.path.join(root, "hosts.yml"), "w", encoding="utf-8") as handle:
        # spark-1's second variable indented one column short
        handle.write(
            "spark_nodes:\n  hosts:\n    spark-1:\n      spark_rank: 0\n"
            "     ansible_host: 127.0.3.3\n"
        )


def inventory(**changes):
    def write(root):
        write_inventory(root, *mutate(**changes))

    return write


# name: (inventory writer, texts the refusal must contain; {root} is the inventory folder)
REFUSED = {
    "spark_nodes misnamed": (
        misnamed_group,
        [
            "cluster: spark_nodes has no hosts in the inventory read from {root}; groups found: "
            "sparks (spark-1, spark-2, spark-3, spark-4); fix: rename the group sparks to "
            "spark_nodes"
        ],
    ),
    "hosts.yml does not parse": (
        hosts_yml_that_does_not_parse,
        [
            "cluster: spark_nodes has no hosts in the inventory read from {root}; it has no "
            "hosts at all; Ansible could not parse {root}/hosts.yml: ",
            "at line 5, column 6; fix: correct {root}/hosts.yml",
        ],
    ),
    "model revision is a branch": (
        inventory(group={"sglang_profile_overrides": {"model_revision": "main"}}),
        [
            "spark-1: sglang_engine.model_revision 'main' is not a commit but a branch or tag "
            "name, which moves; fix: set sglang_profile_overrides.model_revision to the full "
            "40-character commit sha"
        ],
    ),
    "draft revision is a tag": (
        inventory(
            group={"sglang_profile_overrides": {"speculative": {"draft_model_revision": "v2"}}}
        ),
        [
            "spark-1: sglang_engine.speculative.draft_model_revision 'v2' is not a commit but a "
            "branch or tag name, which moves; fix: set "
            "sglang_profile_overrides.speculative.draft_model_revision"
        ],
    ),
    "hf_endpoint without a scheme": (
        inventory(group={"sglang_profile_overrides": {"hf_endpoint": "hf-mirror.com"}}),
        [
            "spark-1: sglang_engine.hf_endpoint 'hf-mirror.com' is not an http(s) URL (it has no "
            "scheme); fix: set sglang_profile_overrides.hf_endpoint to the mirror's URL"
        ],
    ),
    "mirror override not an http(s) URL": (
        inventory(host_extra={"spark-2": {"model_weights_hf_endpoint": "192.168.3.250:8090"}}),
        [
            "spark-2: model_weights_hf_endpoint '192.168.3.250:8090' is not an http(s) URL (it "
            "has no scheme); fix: give the mirror's URL, e.g. https://hf-mirror.com, or remove it"
        ],
    ),
    "relative data_dir": (
        inventory(group={"sglang_profile_overrides": {"data_dir": "srv/sparkfleet"}}),
        [
            "spark-1: sglang_engine.data_dir 'srv/sparkfleet' is a relative path",
            "fix: set sglang_profile_overrides.data_dir to an absolute path",
        ],
    ),
    "misspelt cluster variable": (
        inventory(group={"roce_mut": 9000}),
        [
            "spark-1, spark-2, spark-3, spark-4: roce_mut is not a variable of any role of "
            "sparkfleet.serving (did you mean roce_mtu?), so nothing reads it; fix: rename it "
            "to roce_mtu"
        ],
    ),
    "misspelt overrides on one host": (
        inventory(host_extra={"spark-3": {"sglang_profile_override": {"port": 8090}}}),
        [
            "spark-3: sglang_profile_override is not a variable of any role of "
            "sparkfleet.serving (did you mean sglang_profile_overrides?)",
            "fix: rename it to sglang_profile_overrides",
        ],
    ),
    "overrides not a mapping": (
        inventory(group={"sglang_profile_overrides": ["port", 8090]}),
        [
            "spark-1, spark-2, spark-3, spark-4: sglang_profile_overrides is a list "
            "(['port', 8090]), not a mapping; fix: give a mapping of profile fields"
        ],
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_validate_refuses_offline_naming_host_variable_and_fix(case, tmp_path):
    write, expected = REFUSED[case]
    root = str(tmp_path)
    write(root)
    result = run_playbook(root, VALIDATE)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    for text in expected:
        assert text.format(root=root) in output, f"{case}: {text!r} not in:\n{output}"
    assert "UNREACHABLE" not in output
    # one refusal, not an argument-spec dump per host
    assert "Validation of arguments failed" not in output
    assert output.count("fatal:") == 1, output


def _plays_and_stats(result):
    report = json.loads(result.stdout)
    plays = [play["play"]["name"] for play in report["plays"]]
    ran_on_nodes = [
        (play["play"]["name"], task["task"]["name"], host)
        for play in report["plays"]
        for task in play["tasks"]
        for host, res in task["hosts"].items()
        if host != "localhost"
        and not res.get("skipped")
        and play["play"]["name"] not in FIRST_PLAYS
        and not _is_check(task["task"]["name"])
    ]
    return plays, ran_on_nodes, report["stats"], json.dumps(report)


# site.yml runs the same checks first as validate.yml (nodes.yml, then the preflight role),
# on which test_validate_refuses_offline_naming_host_variable_and_fix runs every case: three
# kinds of refusal (a file that does not parse, the group misnamed, an undeclared variable)
# show here that site.yml stops there too, before any play that touches a node.
SITE_CASES = ("hosts.yml does not parse", "spark_nodes misnamed", "misspelt cluster variable")
with open(os.path.join(REPO, "playbooks", "site.yml"), encoding="utf-8") as _handle:
    STAGE_PLAY = yaml.safe_load(_handle)[1]["name"]


def test_site_and_validate_share_their_first_plays():
    with open(os.path.join(REPO, "playbooks", "site.yml"), encoding="utf-8") as handle:
        site = yaml.safe_load(handle)
    with open(VALIDATE, encoding="utf-8") as handle:
        validate = yaml.safe_load(handle)
    assert site[0]["ansible.builtin.import_playbook"] == "nodes.yml"
    assert validate[0]["ansible.builtin.import_playbook"] == "nodes.yml"
    # site.yml's stage play starts with the same role validate.yml's play runs.
    first_step = site[1]["tasks"][0]["block"][0]
    assert first_step["ansible.builtin.import_role"]["name"] == "sparkfleet.serving.preflight"
    assert first_step["tags"] == ["always"]
    assert [r["role"] for r in validate[1]["roles"]] == ["sparkfleet.serving.preflight"]
    assert set(SITE_CASES) <= set(REFUSED)


@pytest.mark.parametrize("case", SITE_CASES)
def test_site_yml_on_a_refused_inventory_stops_in_its_first_play(case, tmp_path):
    write, expected = REFUSED[case]
    root = str(tmp_path)
    write(root)
    result = run_playbook(
        root, os.path.join(REPO, "site.yml"), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json"
    )
    assert result.returncode != 0, result.stdout[-2000:] + result.stderr
    plays, ran_on_nodes, stats, record = _plays_and_stats(result)
    # Refused by the inventory checks (the first play, or the first step of the stage
    # play), and no task reached a node.
    assert set(plays) <= FIRST_PLAYS | {STAGE_PLAY}, plays
    assert ran_on_nodes == []
    assert all(s["unreachable"] == 0 and s["changed"] == 0 for s in stats.values()), stats
    assert sum(s["failures"] for s in stats.values()) == 1, stats
    first = expected[0].format(root=root).split("; fix:")[0]
    assert json.dumps(first)[1:-1] in record, f"{first!r} not in the run's record"


@pytest.mark.parametrize(
    "playbook",
    [
        "site.yml",
        "playbooks/site.yml",
        "playbooks/restart.yml",
        "playbooks/status.yml",
        "playbooks/bench.yml",
        "playbooks/canary.yml",
    ],
)
def test_every_playbook_refuses_an_inventory_without_nodes_first(playbook, tmp_path):
    misnamed_group(str(tmp_path))
    result = run_playbook(
        str(tmp_path),
        os.path.join(REPO, playbook),
        ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json",
    )
    assert result.returncode != 0, result.stdout[-2000:] + result.stderr
    plays, ran_on_nodes, _stats, record = _plays_and_stats(result)
    assert plays == ["Find the cluster's nodes in the inventory (offline)"]
    assert ran_on_nodes == []
    assert "fix: rename the group sparks to spark_nodes" in record


def test_an_inventory_path_that_does_not_exist_is_named(tmp_path):
    missing = str(tmp_path / "inventory" / "mycluster")
    result = run_playbook(missing, VALIDATE)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert f"read from {missing} (which does not exist)" in output
    assert "fix: name the cluster's folder: -i inventory/<cluster>" in output


# The example leaves the main weights' revision for its operator to pin (issue 44): validate
# refuses it as shipped, and passes once it is given.
PINNED = (
    '{"sglang_profile_overrides": {"model_revision": "0123456789abcdef0123456789abcdef01234567"}}'
)


def test_the_example_inventory_as_shipped_is_refused_until_its_revision_is_pinned():
    result = run_playbook(os.path.join(REPO, "inventory", "qwen38-tp4"), VALIDATE)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "spark-1: sglang_engine.model_revision is not set; fix:" in output
    assert "unreachable=0" in result.stdout


@pytest.mark.parametrize("name", ["qwen38-tp4", "sim", "sim-2node", "sim-8node", "sim-ssh"])
def test_the_shipped_inventories_still_validate(name):
    result = run_playbook(
        os.path.join(REPO, "inventory", name),
        VALIDATE,
        "--vault-password-file",
        os.path.join(REPO, "twin", "vault-password"),
        # what operators and the molecule scenarios pass on the command line
        "-e",
        "model_weights_verify=full",
        "-e",
        "sglang_node_force_restart=true",
        *(["-e", PINNED] if name == "qwen38-tp4" else []),
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "failed=0" in result.stdout and "unreachable=0" in result.stdout


FACTS_THEN_VALIDATE = """
- name: An earlier play of the same run publishes facts with the collection's prefixes
  hosts: spark_nodes
  gather_facts: false
  tasks:
    - name: Set facts as the stages do (set_fact and register)
      ansible.builtin.set_fact:
        sglang_node_config_hash: abc
        roce_gid_index: 3
      changed_when: false

    - name: Register a result under a prefixed name
      ansible.builtin.debug:
        msg: registered
      register: sglang_patches_probe

- name: Validate again
  ansible.builtin.import_playbook: {validate}
"""


def test_facts_of_an_earlier_play_are_not_inventory_variables(tmp_path):
    # Facts are not read from the inventory: a playbook importing another after a first
    # one set them must not be refused for them (only inventory and extra vars are judged).
    write_inventory(str(tmp_path), *mutate())
    playbook = tmp_path / "twice.yml"
    playbook.write_text(FACTS_THEN_VALIDATE.format(validate=VALIDATE), encoding="utf-8")
    result = run_playbook(str(tmp_path), str(playbook))
    assert result.returncode == 0, result.stdout + result.stderr
    # the same names set in the inventory are refused
    write_inventory(str(tmp_path), *mutate(group={"roce_gid_index": 3}))
    result = run_playbook(str(tmp_path), VALIDATE)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "roce_gid_index is not a variable of any role of sparkfleet.serving" in output
