"""model_weights_fetch's steps the repair tests do not reach (issue 45 split main into them).

Check mode, a resumed staging directory, a full disk, the mirror's answers that stop the run
and a file that fails verification: run through main() against the fake mirror.
"""

from __future__ import annotations

import os
import sys

import pytest
from test_model_weights_fetch import FakeMirror, fetch
from weights_fakes import COMMIT, FILES, REPO, flip, stage

from ansible_collections.sparkfleet.serving.plugins.module_utils import _weights as w

SHARD = "model-00002-of-00002.safetensors"


@pytest.fixture
def fake(monkeypatch):
    mirror = FakeMirror()
    hub, errors = mirror.module()
    monkeypatch.setitem(sys.modules, "huggingface_hub", hub)
    monkeypatch.setitem(sys.modules, "huggingface_hub.errors", errors)
    return mirror, hub, errors


def test_check_mode_lists_what_would_be_downloaded_and_writes_nothing(capsys, tmp_path, fake):
    out = fetch(capsys, tmp_path, _ansible_check_mode=True)
    assert out["changed"] and out["downloaded"] == []
    assert out["downloaded_bytes"] == sum(len(d) for d in FILES.values())
    assert sorted(f["path"] for f in out["files"]) == sorted(FILES)
    assert fake[0].sent == [] and os.listdir(tmp_path) == []


def test_a_resumed_staging_directory_fetches_only_what_does_not_verify(capsys, tmp_path, fake):
    final = stage(tmp_path)
    part = w.partial_dir(str(tmp_path), REPO, COMMIT)
    os.unlink(os.path.join(final, w.MANIFEST))
    os.rename(final, part)
    flip(os.path.join(part, SHARD))
    os.unlink(os.path.join(part, "config.json"))
    out = fetch(capsys, tmp_path, verify="full")
    assert out["changed"] and sorted(out["downloaded"]) == sorted(["config.json", SHARD])
    assert fake[0].sent == out["downloaded"]
    assert w.check_revision(final, w.load_json(os.path.join(final, w.MANIFEST)), True)[0] == []
    assert not os.path.exists(part)


def test_a_full_disk_fails_before_any_download(capsys, tmp_path, fake):
    out = fetch(capsys, tmp_path, headroom_bytes=10**18)
    assert out["failed"] and out["needed_bytes"] == sum(len(d) for d in FILES.values())
    assert "free_bytes" in out and "headroom" in out["msg"]
    assert fake[0].sent == []


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        ("RevisionNotFoundError", f"spark-1: the mirror has no revision {COMMIT} of {REPO}"),
        ("RepositoryNotFoundError", f"spark-1: the mirror has no repository {REPO} at revision"),
        ("HfHubHTTPError", f"spark-1: listing {REPO} at revision {COMMIT} on http://mirror.test"),
    ],
)
def test_the_mirrors_refusal_is_named(capsys, tmp_path, fake, error, expected):
    _mirror, hub, errors = fake

    class Api(hub.HfApi):
        def list_repo_tree(self, *args, **kwargs):
            raise getattr(errors, error)("refused")

    hub.HfApi = Api
    out = fetch(capsys, tmp_path)
    assert out["failed"] and out["msg"].startswith(expected) and out["msg"].endswith("refused")


def test_a_file_that_fails_verification_is_removed_and_named(capsys, tmp_path, fake):
    _mirror, hub, _errors = fake
    download = hub.hf_hub_download

    def tampered(repo, filename, **kwargs):
        path = download(repo, filename, **kwargs)
        with open(path, "ab") as handle:
            handle.write(b"x")
        return path

    hub.hf_hub_download = tampered
    out = fetch(capsys, tmp_path)
    assert out["failed"]
    assert out["msg"].startswith(f"spark-1: {REPO}/config.json failed verification")
    part = w.partial_dir(str(tmp_path), REPO, COMMIT)
    assert not os.path.exists(os.path.join(part, "config.json"))
