"""Unit tests for the sglang_patch module: main() run with patched module args."""

from __future__ import annotations

import json
import os
import stat
import sys

import pytest
from ansible.module_utils.testing import patch_module_args

_UNIT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if _UNIT not in sys.path:
    sys.path.insert(0, _UNIT)

import sglang_releases as releases  # noqa: E402

from ansible_collections.sparkfleet.serving.plugins.module_utils import _patch  # noqa: E402
from ansible_collections.sparkfleet.serving.plugins.modules import sglang_patch  # noqa: E402

RELEASE = "0.5.23"


def run(capsys, **args):
    """Run the module's main() with ``args``; return its JSON result."""
    with patch_module_args(args), pytest.raises(SystemExit):
        sglang_patch.main()
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def files(tmp_path):
    """Original tokenizer_manager.py and watchdog.py of a real release, and a dest dir."""
    src = tmp_path / "original"
    out = tmp_path / "patched"
    out.mkdir()
    paths = releases.extract(RELEASE, str(src))
    return {
        "tm": paths[releases.TOKENIZER_MANAGER],
        "wd": paths[releases.WATCHDOG],
        "out": str(out),
    }


def read(path):
    with open(path, "rb") as handle:
        return handle.read()


def test_check_mode_then_real_run_then_idempotent(files, capsys):
    dest = os.path.join(files["out"], "tokenizer_manager.py")
    args = {"src": files["tm"], "dest": dest, "patches": ["max_tokens_clamp"], "mode": "0644"}
    original = read(files["tm"])
    expected = _patch.apply_patches(original.decode(), ["max_tokens_clamp"]).text.encode()

    check = run(capsys, _ansible_check_mode=True, _ansible_diff=True, **args)
    assert check["changed"] is True
    assert not os.path.exists(dest)
    assert os.listdir(files["out"]) == []  # no temporary file left either
    assert check["diff"]["before"] == ""
    assert check["diff"]["after"] == expected.decode()
    assert "# HARDEN-PATCH max_tokens_clamp:" in check["diff"]["after"]
    assert check["applied"] == ["max_tokens_clamp"]
    assert check["src_sha256"] == _patch.sha256_hex(original)
    assert check["dest_sha256"] == _patch.sha256_hex(expected)

    real = run(capsys, _ansible_diff=True, **args)
    assert real["changed"] is True
    assert real["diff"] == check["diff"]
    assert read(dest) == expected
    assert stat.S_IMODE(os.stat(dest).st_mode) == 0o644
    assert os.listdir(files["out"]) == ["tokenizer_manager.py"]
    assert real["dest_sha256"] == _patch.sha256_hex(read(dest)) == check["dest_sha256"]
    assert real["src_sha256"] == check["src_sha256"]
    assert read(files["tm"]) == original

    mtime = os.stat(dest).st_mtime_ns
    again = run(capsys, _ansible_diff=True, **args)
    assert again["changed"] is False
    assert "diff" not in again
    assert again["applied"] == ["max_tokens_clamp"]
    assert again["dest_sha256"] == real["dest_sha256"]
    assert os.stat(dest).st_mtime_ns == mtime

    check_again = run(capsys, _ansible_check_mode=True, **args)
    assert check_again["changed"] is False


def test_mode_change_alone_is_a_change(files, capsys):
    dest = os.path.join(files["out"], "watchdog.py")
    args = {"src": files["wd"], "dest": dest, "patches": ["watchdog_stack_dump"]}
    assert run(capsys, mode="0644", **args)["changed"] is True
    content = read(dest)

    check = run(capsys, _ansible_check_mode=True, mode="0600", **args)
    assert check["changed"] is True
    assert stat.S_IMODE(os.stat(dest).st_mode) == 0o644

    assert run(capsys, mode="0600", **args)["changed"] is True
    assert stat.S_IMODE(os.stat(dest).st_mode) == 0o600
    assert read(dest) == content
    assert run(capsys, mode="0600", **args)["changed"] is False


def test_existing_stale_dest_is_replaced_and_keeps_its_mode(files, capsys):
    dest = os.path.join(files["out"], "watchdog.py")
    with open(dest, "wb") as handle:
        handle.write(b"# stale\n")
    os.chmod(dest, 0o640)
    result = run(
        capsys, _ansible_diff=True, src=files["wd"], dest=dest, patches=["watchdog_stack_dump"]
    )
    assert result["changed"] is True
    assert result["diff"]["before"] == "# stale\n"
    assert b"# HARDEN-PATCH watchdog_stack_dump:" in read(dest)
    assert stat.S_IMODE(os.stat(dest).st_mode) == 0o640


def test_src_already_patched_is_not_patched_twice(files, capsys):
    first = os.path.join(files["out"], "first.py")
    second = os.path.join(files["out"], "second.py")
    run(capsys, src=files["tm"], dest=first, patches=["max_tokens_clamp"], mode="0644")
    result = run(capsys, src=first, dest=second, patches=["max_tokens_clamp"], mode="0644")
    assert result["changed"] is True
    assert result["applied"] == ["max_tokens_clamp"]
    assert result["already_present"] == ["max_tokens_clamp"]
    assert read(second) == read(first)
    assert result["src_sha256"] == result["dest_sha256"]


def drifted_copy(path, tmp_dir):
    """A copy of tokenizer_manager.py without the max_new_tokens anchor statement."""
    text = read(path).decode()
    anchor = '        max_new_tokens = obj.sampling_params.get("max_new_tokens")\n'
    assert anchor in text
    out = os.path.join(tmp_dir, "drifted_tokenizer_manager.py")
    with open(out, "w", encoding="utf-8") as handle:
        handle.write(text.replace(anchor, ""))
    return out


@pytest.mark.parametrize("check_mode", [False, True])
def test_drift_fails_and_leaves_dest_absent(files, capsys, tmp_path, check_mode):
    src = drifted_copy(files["tm"], str(tmp_path))
    dest = os.path.join(files["out"], "tokenizer_manager.py")
    result = run(
        capsys, _ansible_check_mode=check_mode, src=src, dest=dest, patches=["max_tokens_clamp"]
    )
    assert result["failed"] is True
    assert result["msg"] == (
        "max_tokens_clamp: cannot find "
        "'max_new_tokens = obj.sampling_params.get(\"max_new_tokens\")' "
        f"in TokenizerManager._validate_one_request of {src}; {dest} left unchanged"
    )
    assert os.listdir(files["out"]) == []


def test_drift_leaves_existing_dest_untouched(files, capsys, tmp_path):
    dest = os.path.join(files["out"], "tokenizer_manager.py")
    run(capsys, src=files["tm"], dest=dest, patches=["max_tokens_clamp"], mode="0644")
    before, mtime = read(dest), os.stat(dest).st_mtime_ns
    src = drifted_copy(files["tm"], str(tmp_path))
    result = run(capsys, src=src, dest=dest, patches=["max_tokens_clamp"], mode="0600")
    assert result["failed"] is True
    assert read(dest) == before
    assert os.stat(dest).st_mtime_ns == mtime
    assert stat.S_IMODE(os.stat(dest).st_mode) == 0o644
    assert os.listdir(files["out"]) == ["tokenizer_manager.py"]


def test_one_missing_anchor_writes_nothing(files, capsys):
    dest = os.path.join(files["out"], "tokenizer_manager.py")
    result = run(
        capsys, src=files["tm"], dest=dest, patches=["max_tokens_clamp", "watchdog_stack_dump"]
    )
    assert result["failed"] is True
    assert result["msg"].startswith(
        f"watchdog_stack_dump: cannot find class WatchdogRaw in {files['tm']}"
    )
    assert not os.path.exists(dest)


def test_sm12x_gate_on_real_file(tmp_path, capsys):
    src = releases.extract(RELEASE, str(tmp_path / "o"), members=["sglang/srt/utils/common.py"])
    dest = str(tmp_path / "common.py")
    result = run(capsys, src=src["sglang/srt/utils/common.py"], dest=dest, patches=["sm12x_gate"])
    assert result["changed"] is True and result["applied"] == ["sm12x_gate"]
    assert b"torch.cuda.get_device_capability()[0] == 12" in read(dest)


@pytest.mark.parametrize(
    "args, message",
    [
        ({"src": "/nonexistent/tm.py"}, "cannot read src /nonexistent/tm.py"),
        ({"dest": "/nonexistent/dir/tm.py"}, "the directory of dest /nonexistent/dir/tm.py"),
        ({"patches": ["nope"]}, "value of patches must be one or more of"),
        ({"min_new_tokens": 0}, "min_new_tokens must be at least 1"),
    ],
)
def test_bad_arguments_fail(files, capsys, args, message):
    base = {
        "src": files["tm"],
        "dest": os.path.join(files["out"], "tm.py"),
        "patches": ["max_tokens_clamp"],
    }
    result = run(capsys, **{**base, **args})
    assert result["failed"] is True
    assert message in result["msg"]
    assert os.listdir(files["out"]) == []


def test_dest_directory_is_refused(files, capsys):
    result = run(capsys, src=files["tm"], dest=files["out"], patches=["max_tokens_clamp"])
    assert result["failed"] is True
    assert "is a directory" in result["msg"]
