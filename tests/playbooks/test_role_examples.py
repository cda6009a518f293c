"""The example in every role's argument spec (and so in its README) is a playbook that parses.

All examples go into one playbook, checked by ansible-playbook --syntax-check against an
inventory with the groups they name: a misspelt role, entry point (tasks_from) or keyword fails.
"""

from __future__ import annotations

import glob
import os
import subprocess

import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def examples():
    found = {}
    for path in sorted(glob.glob(os.path.join(REPO, "roles", "*", "meta", "argument_specs.yml"))):
        with open(path, encoding="utf-8") as handle:
            main = yaml.safe_load(handle)["argument_specs"]["main"]
        found[path.split(os.sep)[-3]] = main.get("examples", "")
    return found


def test_every_role_example_is_a_playbook_that_parses(tmp_path):
    found = examples()
    assert len(found) >= 10
    plays = []
    for role, text in found.items():
        parsed = yaml.safe_load(text)
        assert isinstance(parsed, list) and parsed, f"role {role}: examples is not a playbook"
        assert f"sparkfleet.serving.{role}" in text, f"role {role}: its example does not use it"
        plays += parsed
    playbook = tmp_path / "examples.yml"
    playbook.write_text(yaml.safe_dump(plays, sort_keys=False), encoding="utf-8")
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        yaml.safe_dump(
            {"spark_nodes": {"hosts": {"spark-1": {}}}, "spark_head": {"hosts": {"spark-1": {}}}}
        ),
        encoding="utf-8",
    )
    env = dict(
        os.environ,
        ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"),
        ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".collections"),
    )
    proc = subprocess.run(
        [
            os.path.join(REPO, ".venv", "bin", "ansible-playbook"),
            "-i",
            str(inventory),
            "--syntax-check",
            str(playbook),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
