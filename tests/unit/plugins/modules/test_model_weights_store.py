"""model_weights_store: inspect, isolate, receive and seal, run through main() on a tmp store.

The repair of issue 21: a shard whose bytes changed with size and mtime kept is found only
by a full verify; the worker's repair (isolate, receiving, the head's rsync, present)
replaces it in the revision the engine loads and leaves no staging directory, also when
the replacement is bad.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest
from ansible.module_utils.testing import patch_module_args
from weights_fakes import COMMIT, FILES, REPO, flip, leftovers, manifest, sha256, stage

from ansible_collections.sparkfleet.serving.plugins.module_utils import _weights as w
from ansible_collections.sparkfleet.serving.plugins.modules import model_weights_store

SHARD = "model-00002-of-00002.safetensors"


def run(capsys, check=False, **args):
    args.setdefault("repo", REPO)
    args.setdefault("commit", COMMIT)
    args.setdefault("node", "spark-4")
    if check:
        args["_ansible_check_mode"] = True
    with patch_module_args(args), pytest.raises(SystemExit):
        model_weights_store.main()
    return json.loads(capsys.readouterr().out)


def rsync(src, dst):
    """What the head's ``rsync --archive --exclude=/.sparkfleet-verified.json src/ dst/`` does.

    A file whose size and mtime match is skipped (rsync's quick check); any other is written
    beside its name and renamed over it (never written in place). Returns what was sent.
    """
    sent = []
    for dirpath, _dirs, names in os.walk(src):
        for name in names:
            rel = os.path.relpath(os.path.join(dirpath, name), src)
            if rel == w.VERIFIED:
                continue
            source, target = os.path.join(src, rel), os.path.join(dst, rel)
            if os.path.isfile(target):
                a, b = os.stat(source), os.stat(target)
                if (a.st_size, a.st_mtime_ns) == (b.st_size, b.st_mtime_ns):
                    continue
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copy2(source, target + ".tmp")
            os.replace(target + ".tmp", target)
            sent.append(rel)
    return sorted(sent)


@pytest.fixture
def nodes(tmp_path):
    """The head's verified copy and a worker's copy of the same revision (same mtimes)."""
    head = stage(tmp_path / "head")
    store = tmp_path / "worker"
    final = stage(store)
    return head, str(store), final


def test_quick_verify_misses_a_flip_that_keeps_stat_and_full_verify_finds_it(capsys, nodes):
    _head, store, final = nodes
    flip(os.path.join(final, SHARD))
    assert run(capsys, store=store)["status"] == "present"  # documented: quick trusts the stat
    out = run(capsys, store=store, verify="full")
    assert out["status"] == "corrupt"
    assert [b["path"] for b in out["bad"]] == [SHARD]
    states = {f["path"]: f["state"] for f in out["files"]}
    assert states == {p: ("corrupt" if p == SHARD else "ok") for p in FILES}
    assert out["missing_bytes"] == len(FILES[SHARD])


def test_worker_repair_replaces_the_file_in_place_and_leaves_no_partial(capsys, nodes):
    head, store, final = nodes
    flip(os.path.join(final, SHARD))
    good_inodes = {p: os.stat(os.path.join(final, p)).st_ino for p in FILES if p != SHARD}
    info = run(capsys, store=store, verify="full")

    isolated = run(capsys, store=store, step="isolate", paths=[b["path"] for b in info["bad"]])
    assert isolated["changed"] and isolated["removed"] == [SHARD]
    assert not os.path.exists(os.path.join(final, SHARD)), "the corrupt copy left the loaded tree"

    recv = run(capsys, store=store, step="receiving", manifest=manifest())
    assert recv["send"] == [SHARD]
    part = w.partial_dir(store, REPO, COMMIT)
    assert os.path.isdir(final), "the revision stays where the engine loads it"

    # The staging directory holds hard links of the good files: only the bad one travels.
    assert rsync(head, part) == sorted([SHARD, w.MANIFEST])
    assert all(os.stat(os.path.join(final, p)).st_ino == i for p, i in good_inodes.items())
    done = run(capsys, store=store, step="present", manifest=manifest(), verify="full")
    assert done["changed"] and done["placed"] == [SHARD] and done["status"] == "present"
    for path in FILES:
        assert sha256(os.path.join(final, path)) == w.sha256_file(os.path.join(head, path))
    assert {p: os.stat(os.path.join(final, p)).st_ino for p in good_inodes} == good_inodes
    assert leftovers(store) == []
    # The stat records follow the new file: quick and full verify agree, nothing to do.
    assert run(capsys, store=store)["status"] == "present"
    assert run(capsys, store=store, verify="full")["bad"] == []
    again = run(capsys, store=store, step="present", manifest=manifest(), verify="full")
    assert not again["changed"]


def test_a_bad_replacement_fails_naming_node_file_and_fix_and_leaves_nothing(capsys, nodes):
    head, store, final = nodes
    flip(os.path.join(final, SHARD))
    info = run(capsys, store=store, verify="full")
    run(capsys, store=store, step="isolate", paths=[b["path"] for b in info["bad"]])
    run(capsys, store=store, step="receiving", manifest=manifest())
    part = w.partial_dir(store, REPO, COMMIT)
    rsync(head, part)
    flip(os.path.join(part, SHARD))  # the copy that arrived is bad too
    out = run(capsys, store=store, step="present", manifest=manifest(), verify="full")
    assert out["failed"]
    assert out["msg"].startswith(f"spark-4: repairing {REPO}@{COMMIT} failed at {SHARD}")
    assert (
        "fix:" in out["msg"]
        and "sparkfleet.serving.verify -i <inventory> -e repair=true" in out["msg"]
    )
    assert leftovers(store) == []
    assert not os.path.exists(os.path.join(final, SHARD)), "nothing corrupt in the loaded tree"
    assert run(capsys, store=store, verify="full")["status"] == "corrupt"  # the next run repairs


def test_receiving_after_a_quick_info_still_takes_the_flip_out_when_full(capsys, nodes):
    """Without the isolate step (old role order), a full receiving step must not trust the stat."""
    head, store, final = nodes
    flip(os.path.join(final, SHARD))
    recv = run(capsys, store=store, step="receiving", manifest=manifest(), verify="full")
    assert recv["send"] == [SHARD] and recv["removed"] == [SHARD]
    rsync(head, w.partial_dir(store, REPO, COMMIT))
    assert run(capsys, store=store, step="present", manifest=manifest(), verify="full")[
        "placed"
    ] == [SHARD]
    assert sha256(os.path.join(final, SHARD)) == w.sha256_file(os.path.join(head, SHARD))
    assert leftovers(store) == []


def test_isolate_keeps_a_file_that_verifies_and_check_mode_changes_nothing(capsys, nodes):
    _head, store, final = nodes
    flip(os.path.join(final, SHARD))
    predicted = run(capsys, check=True, store=store, step="isolate", paths=[SHARD, "config.json"])
    assert predicted["removed"] == [SHARD] and predicted["kept"] == ["config.json"]
    assert os.path.exists(os.path.join(final, SHARD))
    recv = run(
        capsys, check=True, store=store, step="receiving", manifest=manifest(), verify="full"
    )
    assert recv["changed"] and os.path.exists(os.path.join(final, SHARD))
    assert leftovers(store) == []


def test_isolate_takes_the_hugging_face_cache_hard_link_too(capsys, nodes, tmp_path):
    _head, store, final = nodes
    hub = tmp_path / "hub"
    blobs = hub / w.hf_cache_dirname(REPO) / "blobs"
    blobs.mkdir(parents=True)
    entries = {e["path"]: e for e in manifest()["files"]}
    for path in FILES:
        os.link(os.path.join(final, path), blobs / entries[path]["etag"])
    flip(os.path.join(final, SHARD))  # same inode: the blob the engine loads is corrupt too
    out = run(capsys, store=store, step="isolate", paths=[SHARD], hf_hub=str(hub))
    assert out["removed"] == [SHARD]
    assert not (blobs / entries[SHARD]["etag"]).exists()
    assert (blobs / entries["config.json"]["etag"]).exists()


def test_a_new_revision_is_still_sealed_by_one_rename(capsys, tmp_path):
    head = stage(tmp_path / "head")
    store = str(tmp_path / "worker")
    recv = run(capsys, store=store, step="receiving", manifest=manifest())
    assert "send" not in recv
    part = w.partial_dir(store, REPO, COMMIT)
    assert rsync(head, part) == sorted([*FILES, w.MANIFEST])
    out = run(capsys, store=store, step="present", manifest=manifest(), verify="full")
    assert out["status"] == "present"
    final = w.revision_dir(store, REPO, COMMIT)
    assert w.load_json(os.path.join(final, w.MANIFEST))["commit"] == COMMIT
    assert leftovers(store) == []


# Runs as root, as `make test` does everywhere (it installs apt packages): handing a directory
# to another user needs it.
def test_a_fan_out_user_that_is_not_root_writes_the_staging_directories_only(capsys, tmp_path):
    """model_weights_ssh_user not root: the peer's rsync (as that user) may add files to the
    staging directory; everything is the store owner's again before it is verified."""
    import pwd

    nobody = pwd.getpwnam("nobody")
    head = stage(tmp_path / "head")
    store = str(tmp_path / "worker")
    run(capsys, store=store, step="receiving", manifest=manifest(), receiver="nobody")
    part = w.partial_dir(store, REPO, COMMIT)
    assert os.stat(part).st_uid == nobody.pw_uid
    assert os.stat(os.path.join(part, w.VERIFIED)).st_uid == 0
    rsync(head, part)
    for dirpath, _dirs, names in os.walk(part):
        for name in names:
            os.lchown(os.path.join(dirpath, name), nobody.pw_uid, nobody.pw_gid)
    out = run(capsys, store=store, step="present", manifest=manifest(), verify="full",
              receiver="nobody")  # fmt: skip
    assert out["status"] == "present"
    final = w.revision_dir(store, REPO, COMMIT)
    owners = {os.lstat(os.path.join(d, n)).st_uid for d, _s, ns in os.walk(final) for n in ns}
    assert owners == {os.stat(store).st_uid} and os.stat(final).st_uid == os.stat(store).st_uid
    bad = run_failing(
        capsys, store=store, step="receiving", manifest=manifest(), receiver="nobodyx"
    )
    assert bad["msg"] == (
        "spark-4: the fan-out user nobodyx does not exist (model_weights_ssh_user)"
    )


def run_failing(capsys, **args):
    args.setdefault("repo", REPO)
    args.setdefault("commit", COMMIT)
    args.setdefault("node", "spark-4")
    with patch_module_args(args), pytest.raises(SystemExit):
        model_weights_store.main()
    out = json.loads(capsys.readouterr().out)
    assert out.get("failed"), out
    return out
