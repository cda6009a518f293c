"""A fresh clone runs validate.yml as it is: no make setup, no install, no environment.

The clone's ansible.cfg points collections_path at .collections/, whose committed link
ansible_collections/sparkfleet/serving -> ../../.. makes the checkout itself resolve as
sparkfleet.serving. HOME is empty, so nothing installed for the user can stand in.
"""

from __future__ import annotations

import os
import subprocess

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.path.join(REPO, ".venv", "bin")


def run(cmd, cwd, env):
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)


def test_validate_runs_from_a_fresh_clone(tmp_path):
    clone = tmp_path / "clone"
    head = run(["git", "rev-parse", "HEAD"], REPO, None).stdout.strip()
    assert run(["git", "clone", "-q", REPO, str(clone)], tmp_path, None).returncode == 0
    assert run(["git", "checkout", "-q", head], clone, None).returncode == 0
    env = {
        "PATH": f"{BIN}:/usr/bin:/bin",
        "HOME": str(tmp_path / "home"),
        "LANG": "C.UTF-8",
        "ANSIBLE_NOCOLOR": "1",
    }
    proc = run(
        [
            f"{BIN}/ansible-playbook",
            "playbooks/validate.yml",
            "-i",
            "inventory/qwen38-tp4",
            # the example leaves the revision to its operator (validate refuses it unset)
            "-e",
            '{"sglang_profile_overrides": {"model_revision": "'
            + "0123456789abcdef" * 2
            + '01234567"}}',
        ],
        clone,
        env,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "spark-1" in out and "failed=0" in out and "unreachable=0" in out, out
