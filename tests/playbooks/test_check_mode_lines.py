"""Issue 44 (6): a playbook run with --check predicts or says in one line what it skipped.

upgrade.yml, rollback.yml and canary.yml end their play in check mode (an upgrade, a
rollback and a canary restart or stop the cluster: nothing to predict); each used to end
there with nothing printed and rc 0. Now a debug line comes first: ``check mode:
sparkfleet.serving.<playbook> would <what> on <cluster>; skipped: <why>``.

Static: every ``meta: end_play`` (or ``end_host``) of playbooks/ and roles/ that check mode
reaches follows such a line. Run: the playbooks whose check-mode end comes before any task
on a node run offline against an invented inventory (loopback addresses, a 1 s ssh
timeout: a task that tried to reach a node would show as unreachable).
"""

from __future__ import annotations

import glob
import os
import re

import pytest
import yaml
from test_validate import REPO, mutate, run_playbook, write_inventory

LINE = re.compile(r"check mode: sparkfleet\.serving\.(\w+) would [^\"]+; skipped: [^\"]+")
SECTIONS = ("tasks", "pre_tasks", "post_tasks", "handlers", "block", "rescue", "always")


def _lists(node):
    """Every task list in a playbook or tasks file (plays, blocks)."""
    if isinstance(node, list):
        yield node
        for item in node:
            yield from _lists(item)
    elif isinstance(node, dict):
        for key in SECTIONS:
            if isinstance(node.get(key), list):
                yield from _lists(node[key])


def _when(task):
    when = task.get("when", [])
    return " ".join(when if isinstance(when, list) else [str(when)])


def _ends(task):
    meta = task.get("ansible.builtin.meta", task.get("meta"))
    return meta in ("end_play", "end_host")


def check_mode_ends():
    """(file, task list, index) of every play or host end that check mode reaches."""
    files = glob.glob(os.path.join(REPO, "playbooks", "*.yml")) + glob.glob(
        os.path.join(REPO, "roles", "*", "tasks", "*.yml")
    )
    for path in sorted(files):
        with open(path, encoding="utf-8") as handle:
            doc = yaml.safe_load(handle)
        for tasks in _lists(doc):
            for i, task in enumerate(tasks):
                if isinstance(task, dict) and _ends(task) and "ansible_check_mode" in _when(task):
                    yield os.path.relpath(path, REPO), tasks, i


def test_every_check_mode_end_says_what_it_skipped():
    found = list(check_mode_ends())
    # upgrade.yml, rollback.yml, canary.yml at least.
    assert len(found) >= 3, found
    for path, tasks, i in found:
        before = tasks[i - 1] if i > 0 else {}
        msg = " ".join(str((before.get("ansible.builtin.debug") or {}).get("msg", "")).split())
        assert "ansible_check_mode" in _when(before), f"{path}: no check-mode line before the end"
        assert "check mode: sparkfleet.serving." in msg and "; skipped: " in msg, (
            f"{path}: the task before its check-mode end_play prints no "
            f"'check mode: sparkfleet.serving.<playbook> would ...; skipped: ...' line: {msg!r}"
        )
        assert before.get("run_once") is True, f"{path}: the check-mode line is printed per host"


def _loopback_inventory(root):
    hosts, group, host_extra = mutate(
        hosts={f"spark-{i + 1}": {"ansible_host": f"127.0.0.{10 * i + 3}"} for i in range(4)},
        group={
            "spark_mgmt_subnet": "127.0.0.0/24",
            # A full pin: a playbook that changes the cluster refuses a moving revision.
            "sglang_profile_overrides": {"model_revision": "0123456789abcdef" * 2 + "01234567"},
        },
    )
    write_inventory(root, hosts, group, host_extra)


@pytest.mark.parametrize(
    ("playbook", "extra", "words"),
    [
        (
            "upgrade.yml",
            ["-e", "upgrade_image=sglang:0.5.12"],
            "check mode: sparkfleet.serving.upgrade would try sglang:0.5.12 on",
        ),
        ("rollback.yml", [], "check mode: sparkfleet.serving.rollback would return"),
    ],
)
def test_a_playbook_that_ends_in_check_mode_says_so_in_one_line(playbook, extra, words, tmp_path):
    root = tmp_path / "offline-cluster"
    _loopback_inventory(str(root))
    # Results as JSON: each message on one line, as the playbook wrote it.
    result = run_playbook(
        str(root),
        os.path.join(REPO, "playbooks", playbook),
        "--check",
        *extra,
        ANSIBLE_CALLBACK_RESULT_FORMAT="json",
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "UNREACHABLE" not in output  # nothing reached a node
    lines = [m.group(0) for m in LINE.finditer(output)]
    assert len(lines) == 1, output  # once for the cluster, not once per host
    assert words in lines[0] and "offline-cluster" in lines[0], lines
