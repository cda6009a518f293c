"""The control program as the role installs it on the head: every module of
roles/watchdog/files copied beside the entry point (and removed and recorded with it), run
from that directory alone; its fallbacks only for keys the role writes into the description."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest
import yaml

ROLE = pathlib.Path(__file__).parents[3] / "roles" / "watchdog"
FILES = ROLE / "files"
if str(FILES) not in sys.path:
    sys.path.insert(0, str(FILES))

import sparkfleet_cluster_common as common  # noqa: E402


def _tasks(name):
    return yaml.safe_load((ROLE / "tasks" / name).read_text())


def _task(name, title):
    (task,) = [t for t in _tasks(name) if t.get("name", "").startswith(title)]
    return task


INSTALL = _task("control_apply.yml", "Install the control program")["vars"]["__watchdog_program"]
# A plain name is a file of the role's files/ (the file lookup's search path in a role).
INSTALLED = [
    item.replace("{{ role_path }}", str(ROLE)) if "{{" in item else str(FILES / item)
    for item in INSTALL
]
NAMES = [os.path.basename(item) for item in INSTALL]


def test_every_program_file_of_the_role_is_installed_and_the_entry_point_last():
    programs = sorted(p.name for p in FILES.glob("*.py"))
    assert sorted(set(programs) & set(NAMES)) == programs
    # node_paths writes in the order given: a cron run meanwhile runs the previous entry point,
    # never a new one with modules not written yet.
    assert NAMES[-1] == "sparkfleet_cluster.py"


def test_every_installed_file_is_recorded_and_removed_by_the_teardown():
    recorded = _task("control_apply.yml", "Record the control stage")["vars"]["converge_paths"]
    removed = _task("teardown.yml", "Remove the control programs")["sparkfleet.serving.node_paths"][
        "absent"
    ]
    for name in NAMES:
        assert "{{ watchdog_lib_dir }}/" + name in recorded
        assert f"'{name}'" in removed


def test_the_fallbacks_are_only_for_keys_the_role_writes():
    config = _task("control_apply.yml", "Write the cluster description")["vars"]
    written = set(config["__watchdog_config"]) | set(config["__watchdog_config"]["watchdog"])
    assert set(common.FALLBACKS) <= written
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    assert common.FALLBACKS["unreachable_s"] == defaults["watchdog_unreachable_s"]


@pytest.fixture
def head(tmp_path):
    """The lib directory as installed, and a description naming paths under tmp_path."""
    lib = tmp_path / "lib"
    lib.mkdir()
    for path in INSTALLED:
        shutil.copy(path, lib / os.path.basename(path))
    cfg = {
        "launcher": "/bin/false",
        "ranks": [{"rank": 0, "host": "spark-1", "address": "127.0.0.1"}],
        "lock_file": str(tmp_path / "run" / "cluster.lock"),
        "run_dir": str(tmp_path / "run"),
        "cluster_log": str(tmp_path / "cluster.log"),
        "watchdog": {
            "state_dir": str(tmp_path / "state"),
            "log_file": str(tmp_path / "watchdog.log"),
            "max_restarts": 3,
            "window_s": 3600,
            "unreachable_s": 600,
            "stall_s": 120,
        },
    }
    (tmp_path / "cluster.json").write_text(json.dumps(cfg))
    return tmp_path


def _run(head, *argv):
    # -I: neither the script's directory nor PYTHONPATH on sys.path (the entry point puts
    # its own directory there), so nothing of the checkout is imported.
    return subprocess.run(
        [sys.executable, "-I", str(head / "lib" / "sparkfleet_cluster.py"), *argv],
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"], "SPARKFLEET_CLUSTER_CONFIG": str(head / "cluster.json")},
        cwd=head,
        check=False,
        timeout=60,
    )


def test_the_installed_entry_point_runs_both_commands_from_its_directory(head):
    out = _run(head, "cluster", "progress")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["line"] == "no cluster operation recorded yet"
    out = _run(head, "watchdog", "status")
    assert out.returncode == 0, out.stderr
    status = json.loads(out.stdout)
    assert (status["unreachable_s"], status["stall_s"], status["max_restarts"]) == (600, 120, 3)
    out = _run(head)
    assert out.returncode == 2
    assert out.stderr == "usage: sparkfleet_cluster.py cluster|watchdog ARGS\n"
