"""Unit tests for node_paths: main() run with patched module args on a tmp tree.

The owner and group are the test's own user and group (root only where the tests run as root).
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import stat

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.sparkfleet.serving.plugins.modules import node_paths

OWNER = pwd.getpwuid(os.getuid()).pw_name
GROUP = grp.getgrgid(os.getgid()).gr_name


def run(capsys, check=False, diff=False, **args):
    args.setdefault("owner", OWNER)
    args.setdefault("group", GROUP)
    if check:
        args["_ansible_check_mode"] = True
    if diff:
        args["_ansible_diff"] = True
    with patch_module_args(args), pytest.raises(SystemExit):
        node_paths.main()
    return json.loads(capsys.readouterr().out)


def mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def program(tmp_path):
    lib = tmp_path / "opt" / "lib"
    return {
        "directories": [
            {"path": str(lib), "mode": "0755"},
            {"path": str(tmp_path / "log"), "mode": "0750"},
        ],
        "files": [
            {"path": str(lib / "a.py"), "content": "print('a')\n", "mode": "0644"},
            {"path": str(lib / "entry.py"), "content": "import a\n", "mode": "0600"},
        ],
    }


def test_writes_the_set_and_a_second_run_changes_nothing(capsys, tmp_path):
    first = run(capsys, **program(tmp_path))
    lib = tmp_path / "opt" / "lib"
    assert first["changed"]
    assert first["changed_paths"] == [
        str(lib),
        str(tmp_path / "log"),
        str(lib / "a.py"),
        str(lib / "entry.py"),
    ]
    assert (lib / "entry.py").read_text() == "import a\n"
    assert (mode(lib), mode(tmp_path / "log"), mode(lib / "a.py"), mode(lib / "entry.py")) == (
        0o755,
        0o750,
        0o644,
        0o600,
    )
    again = run(capsys, **program(tmp_path))
    assert not again["changed"] and again["changed_paths"] == []
    assert sorted(os.listdir(lib)) == ["a.py", "entry.py"], "no temporary file left"


def test_puts_back_an_edited_file_and_a_mode_and_names_only_them(capsys, tmp_path):
    run(capsys, **program(tmp_path))
    lib = tmp_path / "opt" / "lib"
    (lib / "a.py").write_text("edited\n")
    os.chmod(tmp_path / "log", 0o777)
    result = run(capsys, **program(tmp_path))
    assert result["changed_paths"] == [str(tmp_path / "log"), str(lib / "a.py")]
    assert (lib / "a.py").read_text() == "print('a')\n" and mode(tmp_path / "log") == 0o750


def test_check_mode_predicts_with_a_diff_and_touches_nothing(capsys, tmp_path):
    run(capsys, **program(tmp_path))
    lib = tmp_path / "opt" / "lib"
    (lib / "a.py").write_text("edited\n")
    result = run(capsys, check=True, diff=True, **program(tmp_path))
    assert result["changed"] and result["changed_paths"] == [str(lib / "a.py")]
    assert result["diff"] == [
        {
            "before_header": str(lib / "a.py"),
            "after_header": str(lib / "a.py"),
            "before": "edited\n",
            "after": "print('a')\n",
        }
    ]
    assert (lib / "a.py").read_text() == "edited\n"
    fresh = run(capsys, check=True, **program(tmp_path / "fresh"))
    assert len(fresh["changed_paths"]) == 4 and not (tmp_path / "fresh").exists()


def test_absent_removes_files_links_and_trees_never_a_links_target(capsys, tmp_path):
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "data").write_text("x")
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "f").write_text("y")
    (tmp_path / "file").write_text("z")
    os.symlink(kept, tmp_path / "link")
    paths = [str(tmp_path / name) for name in ("tree", "file", "link", "missing")]
    predicted = run(capsys, check=True, absent=paths)
    assert predicted["changed_paths"] == paths[:3] and (tmp_path / "tree").exists()
    result = run(capsys, absent=paths)
    assert result["changed_paths"] == paths[:3]
    assert sorted(os.listdir(tmp_path)) == ["kept"] and (kept / "data").read_text() == "x"
    assert not run(capsys, absent=paths)["changed"]


@pytest.mark.parametrize("kind", ["directory where a file is", "file where a directory is"])
def test_a_path_of_another_type_is_refused_naming_it(capsys, tmp_path, kind):
    target = tmp_path / "p"
    if kind.startswith("directory"):
        target.write_text("an operator's file")
        args = {"directories": [{"path": str(target), "mode": "0755"}]}
    else:
        target.mkdir()
        args = {"files": [{"path": str(target), "content": "x", "mode": "0644"}]}
    result = run(capsys, **args)
    assert result["failed"] and str(target) in result["msg"] and "move it away" in result["msg"]
    assert target.exists()
