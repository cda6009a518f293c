"""Unit tests for model_weights_publish: main() run with patched module args on a tmp tree."""

from __future__ import annotations

import json
import os

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.sparkfleet.serving.plugins.module_utils._weights import MANIFEST
from ansible_collections.sparkfleet.serving.plugins.modules import model_weights_publish

COMMIT = "0123456789abcdef0123456789abcdef01234567"
REPO = "org/Draft-1B"


def run(capsys, check=False, **args):
    if check:
        args["_ansible_check_mode"] = True
    with patch_module_args(args), pytest.raises(SystemExit):
        model_weights_publish.main()
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def revision(tmp_path):
    """A verified revision: two files and its manifest."""
    src = tmp_path / "store" / "org--Draft-1B" / COMMIT
    (src / "sub").mkdir(parents=True)
    (src / "config.json").write_text("{}\n")
    (src / "sub" / "chat.jinja").write_text("{{ messages }}\n")
    files = [
        {"path": "config.json", "etag": "a" * 64},
        {"path": "sub/chat.jinja", "etag": "b" * 64},
    ]
    (src / MANIFEST).write_text(json.dumps({"repo": REPO, "commit": COMMIT, "files": files}))
    return src


def test_link_points_at_the_revision_and_a_second_run_changes_nothing(capsys, tmp_path, revision):
    link = tmp_path / "models" / "org" / "Draft-1B"
    first = run(capsys, src=str(revision), link=str(link))
    assert first["changed"]
    assert os.path.realpath(link) == str(revision)
    assert not os.path.isabs(os.readlink(link)), "relative, so the container mount resolves it"
    assert not run(capsys, src=str(revision), link=str(link))["changed"]


def test_a_directory_that_is_not_ours_is_moved_aside_not_removed(capsys, tmp_path, revision):
    link = tmp_path / "models" / "org" / "Draft-1B"
    link.mkdir(parents=True)
    (link / "weights.bin").write_text("an operator's copy")
    result = run(capsys, src=str(revision), link=str(link))
    aside = tmp_path / "models" / "org" / "Draft-1B.pre-sparkfleet"
    assert (aside / "weights.bin").read_text() == "an operator's copy"
    assert os.path.realpath(link) == str(revision)
    assert any("aside" in line for line in result["actions"])


def test_check_mode_reports_and_touches_nothing(capsys, tmp_path, revision):
    link = tmp_path / "models" / "org" / "Draft-1B"
    hub = tmp_path / "hub"
    result = run(
        capsys,
        check=True,
        src=str(revision),
        link=str(link),
        hf_hub=str(hub),
        repo=REPO,
        commit=COMMIT,
    )
    assert result["changed"] and result["actions"]
    assert not os.path.lexists(link)
    assert not hub.exists()


def test_hf_cache_layout_resolves_every_file_and_repairs_a_wrong_link(capsys, tmp_path, revision):
    hub = tmp_path / "hub"
    args = {"src": str(revision), "hf_hub": str(hub), "repo": REPO, "commit": COMMIT}
    assert run(capsys, **args)["changed"]
    snapshot = hub / "models--org--Draft-1B" / "snapshots" / COMMIT
    assert (snapshot / "config.json").read_text() == "{}\n"
    assert (snapshot / "sub" / "chat.jinja").read_text() == "{{ messages }}\n"
    assert not run(capsys, **args)["changed"]
    # A snapshot entry that points elsewhere is put back; a real file there is kept aside.
    os.unlink(snapshot / "config.json")
    (snapshot / "config.json").write_text("not ours")
    repaired = run(capsys, **args)
    assert repaired["changed"]
    assert (snapshot / "config.json").read_text() == "{}\n"
    assert (snapshot / "config.json.pre-sparkfleet").read_text() == "not ours"


def test_copies_skip_what_the_revision_does_not_carry(capsys, tmp_path, revision):
    dest = tmp_path / "templates" / "chat.jinja"
    dest.parent.mkdir()
    result = run(
        capsys,
        src=str(revision),
        copies=[
            {"name": "sub/chat.jinja", "dest": str(dest)},
            {"name": "missing.jinja", "dest": str(tmp_path / "x")},
        ],
    )
    assert dest.read_text() == "{{ messages }}\n"
    assert oct(dest.stat().st_mode & 0o777) == "0o644"
    assert result["skipped"] == ["missing.jinja"]
    assert not (tmp_path / "x").exists()


def test_an_unverified_revision_is_refused(capsys, tmp_path, revision):
    os.unlink(revision / MANIFEST)
    result = run(capsys, src=str(revision), link=str(tmp_path / "l"))
    assert result["failed"]
    assert "not a verified revision" in result["msg"]
    assert not os.path.lexists(tmp_path / "l")
