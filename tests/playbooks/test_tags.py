"""Stage tags of site.yml: what each --tags subset runs (ansible-playbook --list-tasks).

Listing connects to no host. The bring-up step includes its tasks at run time, so it
shows as its include task; that step holds the whole bring-up (check every rank, stop,
start workers, start the head, wait) under one tag, so no subset selects part of it.
"""

from __future__ import annotations

import os
import re

import pytest
import yaml
from test_validate import mutate, run_playbook, write_inventory

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SITE = os.path.join(REPO, "playbooks", "site.yml")

INVENTORY_CHECK = "Check the inventory of the whole cluster"
HOST_CHECKS = "Run the host checks"
# Each stage's writers sit behind one include (entered when the converge probe shows a
# difference), so the listing names that include.
PROBE = "Read every node's state in one call"
MTU_LIVE = "roce : Configure the data plane (MTU, address, jumbo pings, GID)"
GID = "Compare the data plane with what the node holds"
# The probe's GID row published (publish.yml, imported: its own task is listed).
GID_FACT = (
    "roce : Publish the node's data plane and its GIDs for the launch, status and the watchdog"
)
PATCH = "sglang_patches : Extract, patch and expose the files"
RENDER = "sglang_node : Derive this rank's launch inputs"
BRINGUP = "Restart in order where needed, then wait for health and smoke"
WEIGHTS = (
    "model_weights : Stage the weights"
    " (plan, staged revisions, download or repair, publish, record)"
)


@pytest.fixture(scope="module")
def inventory(tmp_path_factory):
    root = tmp_path_factory.mktemp("inv")
    write_inventory(str(root), *mutate())
    return str(root)


def listed(inventory, *args):
    proc = run_playbook(inventory, SITE, "--list-tasks", *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


@pytest.mark.parametrize(
    ("tags", "present", "absent"),
    [
        (
            "roce",
            [INVENTORY_CHECK, PROBE, MTU_LIVE, GID, GID_FACT],
            [HOST_CHECKS, PATCH, RENDER, BRINGUP, WEIGHTS],
        ),
        # the launch needs the patches' facts and this node's GID: both come along, read-only
        # for the GID; the live network change does not
        (
            "launch",
            [INVENTORY_CHECK, PROBE, GID, GID_FACT, PATCH, RENDER],
            [MTU_LIVE, BRINGUP, HOST_CHECKS],
        ),
        ("patches", [INVENTORY_CHECK, PATCH], [RENDER, MTU_LIVE, BRINGUP]),
        ("bringup", [INVENTORY_CHECK, PROBE, BRINGUP], [RENDER, PATCH, MTU_LIVE]),
        ("preflight", [INVENTORY_CHECK, HOST_CHECKS], [MTU_LIVE, PATCH, RENDER, BRINGUP]),
        ("weights", [INVENTORY_CHECK, WEIGHTS], [MTU_LIVE, PATCH, RENDER, BRINGUP, HOST_CHECKS]),
    ],
)
def test_a_stage_tag_runs_its_stage_and_what_it_needs(inventory, tags, present, absent):
    out = listed(inventory, "--tags", tags)
    for name in present:
        assert name in out, f"--tags {tags}: {name!r} missing\n{out}"
    for name in absent:
        assert name not in out, f"--tags {tags}: {name!r} listed\n{out}"


def test_the_whole_run_lists_every_stage(inventory):
    out = listed(inventory)
    for name in (INVENTORY_CHECK, HOST_CHECKS, PROBE, MTU_LIVE, GID, PATCH, RENDER, BRINGUP):
        assert name in out


def test_every_play_or_stage_of_site_yml_carries_a_stage_tag():
    with open(SITE, encoding="utf-8") as handle:
        plays = yaml.safe_load(handle)
    tags = set()
    for play in plays:
        if play.get("tags"):
            tags.update(play["tags"])
            continue
        # The stages' play: each of its steps carries its stage's tag (the steps sit in one
        # block whose always releases the watchdog's hold).
        steps = [
            step
            for task in play["tasks"]
            for step in (task["block"] + task.get("always", []) if "block" in task else [task])
        ]
        for task in steps:
            assert task.get("tags"), f"{play['name']!r}: step {task['name']!r} has no tag"
            tags.update(task["tags"])
    assert {
        "always",
        "preflight",
        "roce",
        "weights",
        "launch",
        "patches",
        "bringup",
        "watchdog",
    } <= tags


def test_the_bring_up_is_one_unit_under_one_tag():
    # No task of the bring-up carries its own tag: a subset selects all of it or none.
    path = os.path.join(REPO, "roles", "sglang_node", "tasks", "bringup.yml")
    with open(path, encoding="utf-8") as handle:
        assert not re.search(r"^\s+tags:", handle.read(), re.M)
