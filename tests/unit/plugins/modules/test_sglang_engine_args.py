# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Run sglang_engine_args' main() against a fake docker on PATH (a script that answers
`image inspect` and the throwaway parse the way the engine's parser would)."""

from __future__ import annotations

import json
import os
import stat

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.sparkfleet.serving.plugins.module_utils import _engine_args
from ansible_collections.sparkfleet.serving.plugins.modules import sglang_engine_args

IMAGE_ID = "sha256:" + "4f" * 32
COMMAND = [
    "python3",
    "-m",
    "sglang.launch_server",
    "--model-path",
    "/models/qwen",
    "--tp-size",
    "2",
    "--sparkfleet-no-such-flag",
]
FAKE_DOCKER = r"""#!/bin/bash
printf '%q ' "$@" >> "$FAKE_DOCKER_LOG"; echo >> "$FAKE_DOCKER_LOG"
if [ "$1 $2" = "image inspect" ]; then
  [ "${@: -1}" = "$FAKE_IMAGE" ] || { echo "Error: No such image" >&2; exit 1; }
  echo "$FAKE_IMAGE_ID"
  exit 0
fi
if [ "$1" = run ]; then
  [ -n "$FAKE_VERDICT" ] && echo "sparkfleet-argcheck: $FAKE_VERDICT"
  echo "the image's stderr" >&2
  exit 0
fi
exit 1
"""


class Exited(Exception):
    def __init__(self, payload):
        super().__init__(payload)
        self.payload = payload


class Failed(Exited):
    pass


@pytest.fixture
def docker(tmp_path, monkeypatch):
    """A fake docker first on PATH; returns a function listing the calls it got."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "docker"
    script.write_text(FAKE_DOCKER)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    log = tmp_path / "docker.log"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_DOCKER_LOG", str(log))
    monkeypatch.setenv("FAKE_IMAGE", "sparkfleet-twin/sglang:0.5.9")
    monkeypatch.setenv("FAKE_IMAGE_ID", IMAGE_ID)
    monkeypatch.setenv("FAKE_VERDICT", json.dumps({"ok": True}))

    def fail_json(self, msg, **kwargs):
        raise Failed(dict(kwargs, msg=msg, failed=True))

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", lambda self, **kw: _raise(Exited(kw)))
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)
    return lambda: log.read_text().splitlines() if log.exists() else []


def _raise(exc):
    raise exc


def run(args, expect=Exited):
    with patch_module_args(args), pytest.raises(expect) as info:
        sglang_engine_args.main()
    assert isinstance(info.value, expect), info.value.payload
    return info.value.payload


def parses(calls):
    return [c for c in calls if c.startswith("run ")]


def test_a_refused_flag_fails_naming_image_argument_and_field(docker, tmp_path, monkeypatch):
    monkeypatch.setenv(
        "FAKE_VERDICT",
        json.dumps(
            {
                "refused": "unrecognized arguments: --sparkfleet-no-such-flag",
                "unknown": ["--sparkfleet-no-such-flag"],
            }
        ),
    )
    args = {"image": "sparkfleet-twin/sglang:0.5.9", "command": COMMAND, "state_dir": str(tmp_path)}
    result = run(args, Failed)
    assert result["verdict"] == "refused"
    assert result["image_id"] == IMAGE_ID
    assert "image sparkfleet-twin/sglang:0.5.9" in result["msg"]
    assert "--sparkfleet-no-such-flag (the profile field extra_args)" in result["msg"]
    # The parse ran once, in a throwaway container of the image id with the rank's arguments.
    (call,) = parses(docker())
    assert "--rm" in call and "--network none" in call and IMAGE_ID in call
    assert call.endswith(" ".join(COMMAND[3:]) + " ")
    # Its verdict is kept where the launcher's check finds it: a second run parses nothing.
    kept = json.loads((tmp_path / _engine_args.CACHE).read_text())
    assert [entry["image_id"] for entry in kept] == [IMAGE_ID]
    assert run(args, Failed)["verdict"] == "refused"
    assert len(parses(docker())) == 1


@pytest.mark.parametrize("check_mode", [False, True], ids=["run", "check"])
def test_accepted_arguments_pass(docker, tmp_path, check_mode):
    result = run(
        {
            "image": "sparkfleet-twin/sglang:0.5.9",
            "command": COMMAND[:-1],
            "state_dir": str(tmp_path),
            "_ansible_check_mode": check_mode,
        }
    )
    assert (result["changed"], result["verdict"], result["msg"]) == (False, "ok", "")


def test_an_image_not_on_the_node_is_no_refusal(docker, tmp_path):
    result = run({"image": "other:1", "command": COMMAND, "state_dir": str(tmp_path)})
    assert (result["verdict"], result["image_id"]) == ("unavailable", "")
    assert "image other:1 is not on this node" in result["msg"]
    assert parses(docker()) == []


def test_a_parse_that_cannot_run_is_no_refusal_and_keeps_nothing(docker, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_VERDICT", "")
    result = run(
        {"image": "sparkfleet-twin/sglang:0.5.9", "command": COMMAND, "state_dir": str(tmp_path)}
    )
    assert result["verdict"] == "unavailable"
    assert "could not run in sparkfleet-twin/sglang:0.5.9: the image's stderr" in result["msg"]
    assert not (tmp_path / _engine_args.CACHE).exists()
