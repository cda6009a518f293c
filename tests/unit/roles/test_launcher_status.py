"""The launcher's status verb, cut from its template and run by bash against a fake docker.

The watchdog and the bring-up read every rank's state from it: an absent container must
say ``absent`` (docker prints an empty line for it), never an empty answer.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
from pathlib import Path

import pytest

TEMPLATE = (
    Path(__file__).resolve().parents[3]
    / "roles"
    / "sglang_node"
    / "templates"
    / "sparkfleet-sglang.sh.j2"
)

# docker container inspect --format "<state> <label>" NAME, as the docker CLI answers it here.
FAKE_DOCKER = """#!/bin/bash
[[ "$1 $2" == "container inspect" ]] || exit 2
case "${FAKE_STATE:-absent}" in
  absent) echo; echo "Error: No such container: ${@: -1}" >&2; exit 1 ;;
  *) echo "$FAKE_STATE ${FAKE_LABEL:--}" ;;
esac
"""


def function(text, name):
    match = re.search(rf"^{name}\(\) \{{\n.*?^\}}\n", text, re.M | re.S)
    assert match, name
    return match.group(0).replace("{{ '{{' }}", "{{").replace("{{ '}}' }}", "}}")


@pytest.fixture
def status(tmp_path):
    text = TEMPLATE.read_text()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    docker = bin_dir / "docker"
    docker.write_text(FAKE_DOCKER)
    docker.chmod(docker.stat().st_mode | stat.S_IEXEC)
    env_file = tmp_path / "env"
    env_file.write_text("A=1\n")
    mark = tmp_path / "stopped"
    script = (
        f"set -euo pipefail; NAME=r0; ENV_FILE={env_file}; PATCH_FILES=(); STOPPED_MARK={mark}\n"
        + function(text, "config_hash")
        + function(text, "status")
        + "status\n"
    )
    launcher = tmp_path / "launcher"
    launcher.write_text("#!/bin/bash\n" + script)

    def run(state=None, label=None, stopped=False):
        if stopped:
            mark.write_text("by test\n")
        elif mark.exists():
            mark.unlink()
        env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
        env.update({k: v for k, v in (("FAKE_STATE", state), ("FAKE_LABEL", label)) if v})
        out = subprocess.run(
            ["bash", str(launcher)], capture_output=True, text=True, env=env, check=True
        )
        return out.stdout.strip()

    def current_hash():
        # config_hash alone, with $0 the same launcher file.
        body = script.split("status() {", 1)[0] + "config_hash\n"
        return subprocess.run(
            ["bash", "-c", body, str(launcher)], capture_output=True, text=True, check=True
        ).stdout.strip()

    run.current_hash = current_hash
    return run


def test_an_absent_container_is_absent_not_an_empty_answer(status):
    assert status() == "absent"


def test_a_deliberately_stopped_rank_says_so(status):
    assert status(stopped=True) == "stopped"
    assert status(state="exited", stopped=True) == "stopped"
    assert status(state="paused", stopped=True) == "paused"


def test_a_running_rank_is_current_only_with_its_configuration_label(status):
    assert status(state="running", label=status.current_hash()) == "running current"
    assert status(state="running", label="0123456789abcdef") == "running stale"
    assert status(state="running") == "running stale"
    assert status(state="exited") == "exited"
