"""model_weights_fetch repairing the head's copy from the mirror (issue 21).

huggingface_hub is replaced by a fake mirror (sys.modules): it serves the good bytes of
the revision and counts what it sends, so the tests see exactly what was downloaded.
"""

from __future__ import annotations

import json
import os
import sys
import types

import pytest
from ansible.module_utils.testing import patch_module_args
from weights_fakes import COMMIT, FILES, REPO, flip, leftovers, manifest, sha256, stage

from ansible_collections.sparkfleet.serving.plugins.module_utils import _weights as w
from ansible_collections.sparkfleet.serving.plugins.modules import model_weights_fetch

SHARD = "model-00002-of-00002.safetensors"


class FakeMirror:
    def __init__(self):
        self.sent, self.broken, self.tokens = [], False, []
        entries = {e["path"]: e for e in manifest()["files"]}
        self.tree = [
            types.SimpleNamespace(
                path=p,
                size=len(d),
                blob_id="b" * 40,
                lfs=types.SimpleNamespace(sha256=entries[p]["sha256"], size=len(d)),
            )
            for p, d in sorted(FILES.items())
        ]

    def module(self):
        mirror = self

        class HTTPError(Exception):
            pass

        class HfApi:
            def __init__(self, endpoint=None, token=None):
                mirror.tokens.append(token)

            def model_info(self, repo, revision=None, token=None):
                mirror.tokens.append(token)
                return types.SimpleNamespace(sha=revision)

            def list_repo_tree(self, repo, revision=None, recursive=True, token=None):
                mirror.tokens.append(token)
                return list(mirror.tree)

        def hf_hub_download(repo, filename, revision=None, local_dir=None, token=None):
            mirror.tokens.append(token)
            if mirror.broken:
                raise HTTPError(f"500 Server Error for {filename}")
            mirror.sent.append(filename)
            path = os.path.join(local_dir, filename)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as handle:
                handle.write(FILES[filename])
            return path

        hub = types.ModuleType("huggingface_hub")
        hub.HfApi, hub.hf_hub_download = HfApi, hf_hub_download
        errors = types.ModuleType("huggingface_hub.errors")
        errors.HfHubHTTPError = HTTPError
        errors.RepositoryNotFoundError = type("RepositoryNotFoundError", (HTTPError,), {})
        errors.RevisionNotFoundError = type("RevisionNotFoundError", (HTTPError,), {})
        return hub, errors


@pytest.fixture
def mirror(monkeypatch):
    fake = FakeMirror()
    hub, errors = fake.module()
    monkeypatch.setitem(sys.modules, "huggingface_hub", hub)
    monkeypatch.setitem(sys.modules, "huggingface_hub.errors", errors)
    return fake


def fetch(capsys, store, **args):
    args = {
        "repo": REPO,
        "revision": COMMIT,
        "store": str(store),
        "endpoint": "http://mirror.test",
        "node": "spark-1",
        **args,
    }
    with patch_module_args(args), pytest.raises(SystemExit):
        model_weights_fetch.main()
    return json.loads(capsys.readouterr().out)


def test_full_verify_on_the_head_downloads_only_the_flipped_shard(capsys, tmp_path, mirror):
    final = stage(tmp_path)
    flip(os.path.join(final, SHARD))
    kept = {p: os.stat(os.path.join(final, p)).st_ino for p in FILES if p != SHARD}
    quick = fetch(capsys, tmp_path)
    assert not quick["changed"] and mirror.sent == []  # quick trusts the stat (documented)
    out = fetch(capsys, tmp_path, verify="full")
    assert out["changed"] and out["repaired"] == [SHARD] and out["downloaded"] == [SHARD]
    assert mirror.sent == [SHARD]
    expected = {e["path"]: e["sha256"] for e in manifest()["files"]}
    assert {p: sha256(os.path.join(final, p)) for p in FILES} == expected
    assert {p: os.stat(os.path.join(final, p)).st_ino for p in kept} == kept
    assert leftovers(tmp_path) == []
    again = fetch(capsys, tmp_path, verify="full")
    assert not again["changed"] and mirror.sent == [SHARD]


def test_a_repair_the_mirror_breaks_leaves_no_partial_and_nothing_corrupt(capsys, tmp_path, mirror):
    final = stage(tmp_path)
    flip(os.path.join(final, SHARD))
    mirror.broken = True
    out = fetch(capsys, tmp_path, verify="full")
    assert out["failed"]
    assert out["msg"].startswith(f"spark-1: downloading {REPO}/{SHARD}")
    assert f"while repairing {SHARD} of {REPO}@{COMMIT}" in out["msg"]
    assert "fix:" in out["msg"]
    assert leftovers(tmp_path) == []
    assert not os.path.exists(os.path.join(final, SHARD)), (
        "the corrupt copy is out of the loaded tree"
    )
    assert os.path.isfile(os.path.join(final, w.MANIFEST)), "the revision stays in place"
    mirror.broken = False
    assert fetch(capsys, tmp_path)["downloaded"] == [SHARD]  # even a quick run completes it
    assert (
        sha256(os.path.join(final, SHARD))
        == {e["path"]: e["sha256"] for e in manifest()["files"]}[SHARD]
    )
    assert leftovers(tmp_path) == []


def test_a_new_revision_is_downloaded_whole_and_sealed(capsys, tmp_path, mirror):
    out = fetch(capsys, tmp_path)
    assert out["changed"] and sorted(out["downloaded"]) == sorted(FILES)
    final = w.revision_dir(str(tmp_path), REPO, COMMIT)
    assert w.check_revision(final, w.load_json(os.path.join(final, w.MANIFEST)), full=True)[0] == []
    assert leftovers(tmp_path) == []
    assert not fetch(capsys, tmp_path, verify="full")["changed"]


@pytest.mark.parametrize(
    ("endpoint", "trusted", "sent"),
    [
        ("http://mirror.test", [], False),
        ("https://hf-mirror.com", [], False),
        ("https://huggingface.co", [], True),
        ("https://huggingface.co/", [], True),
        ("http://huggingface.co", [], False),
        ("http://mirror.test", ["http://mirror.test"], True),
        ("http://MIRROR.test:80/", ["http://mirror.test"], True),
        ("https://hf-mirror.com", ["https://hf-mirror.com:8443"], False),
        ("https://hf-mirror.com.evil.test", ["https://hf-mirror.com"], False),
    ],
)
def test_the_token_reaches_the_client_only_for_a_trusted_endpoint(
    capsys, tmp_path, mirror, monkeypatch, endpoint, trusted, sent
):
    """What the client is asked to send: the token, or False (never its own HF_TOKEN)."""
    token_file = tmp_path / "hf-token"
    token_file.write_text("hf_secretToken\n", encoding="utf-8")
    monkeypatch.setenv("HF_TOKEN", "hf_fromTheEnvironment")
    out = fetch(
        capsys,
        tmp_path / "store",
        endpoint=endpoint,
        token_file=str(token_file),
        token_endpoints=trusted,
    )
    assert out["changed"] and out["token_sent"] is sent
    assert mirror.tokens and set(mirror.tokens) == {"hf_secretToken" if sent else False}
    assert "HF_TOKEN" not in os.environ
    assert "hf_secretToken" not in json.dumps(out)


def test_no_token_file_sends_no_token_the_client_would_find_itself(capsys, tmp_path, mirror):
    out = fetch(capsys, tmp_path, endpoint="https://huggingface.co")
    assert out["token_sent"] is False and set(mirror.tokens) == {False}
