"""teardown.yml is refused offline unless -e teardown_confirm names the cluster (issue 44).

The refusal comes from the inventory checks (preflight, preflight_playbook=teardown), the
first play on the nodes, which runs on the controller: the hosts are on loopback (no sshd
there) with a 1 s ssh timeout (the harness of test_validate.py), so a task that tried to
reach one would show as unreachable, and the run's JSON record lists every play that
started. The cluster's name is the inventory folder's, or cluster_name where the inventory
sets it.
"""

from __future__ import annotations

import json
import os

import pytest
from test_validate import REPO, mutate, run_playbook, write_inventory

TEARDOWN = os.path.join(REPO, "playbooks", "teardown.yml")
FIRST_PLAYS = [
    "Find the cluster's nodes in the inventory (offline)",
    "Check the inventory (offline)",
]


def _run(root, *args):
    result = run_playbook(root, TEARDOWN, *args, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json")
    report = json.loads(result.stdout)
    plays = [play["play"]["name"] for play in report["plays"]]
    return result, report, plays


@pytest.mark.parametrize(
    ("args", "cluster_name", "said"),
    [
        ((), None, "(teardown_confirm is not set)"),
        # The inventory names the cluster: its folder's name is not it.
        (("-e", "teardown_confirm={folder}"), "rack-7", "(teardown_confirm is mycluster)"),
    ],
    ids=["missing", "folder-not-cluster_name"],
)
def test_teardown_is_refused_offline_naming_the_variable_and_the_fix(
    args, cluster_name, said, tmp_path
):
    root = tmp_path / "mycluster"
    hosts, group, host_extra = mutate(group={"cluster_name": cluster_name} if cluster_name else {})
    write_inventory(str(root), hosts, group, host_extra)
    result, report, plays = _run(str(root), *(a.format(folder=root.name) for a in args))
    record = json.dumps(report)
    assert result.returncode != 0, result.stdout[-2000:] + result.stderr
    assert plays == FIRST_PLAYS, plays
    stats = report["stats"]
    assert sum(s["failures"] for s in stats.values()) == 1, stats
    assert all(s["unreachable"] == 0 and s["changed"] == 0 for s in stats.values()), stats
    name = cluster_name or "mycluster"
    for text in (
        said,
        "teardown stops and removes what sparkfleet.serving installed (the weights stay) on "
        f"the cluster '{name}'",
        f"run again with -e teardown_confirm={name}",
        "no node was contacted",
    ):
        assert text in record, f"{text!r} not in the run's record"


def test_the_cluster_name_passes_the_confirmation(tmp_path):
    root = tmp_path / "mycluster"
    write_inventory(str(root), *mutate())
    # --limit: the inventory checks refuse a limited teardown, so the run ends there, having
    # passed the confirmation, without reaching a node.
    result, report, plays = _run(
        str(root), "-e", "teardown_confirm=mycluster", "--limit", "spark-1"
    )
    record = json.dumps(report)
    assert result.returncode != 0, result.stdout[-2000:] + result.stderr
    assert plays == FIRST_PLAYS, plays
    assert "run again with -e teardown_confirm" not in record
    assert "this run holds only spark-1" in record
    assert all(s["unreachable"] == 0 for s in report["stats"].values()), report["stats"]
