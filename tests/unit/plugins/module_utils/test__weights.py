"""Weight staging: pins, mounts, the plan from a profile, verification, disk and stat checks."""

from __future__ import annotations

import hashlib
import os

import pytest

from ansible_collections.sparkfleet.serving.plugins.module_utils import _weights as w

SHA = "50307d4c4cde6860d4eee73e2547cd786fe8e8a4"
SEED_VOLUMES = [
    "/home/tiger/.config/qwen38/sglang-cache:/cache",
    "/home/tiger/.cache/huggingface:/root/.cache/huggingface",
    "/home/tiger/.config/qwen38:/out",
    "/home/tiger/models:/home/tiger/models",
]


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (SHA, None),
        (None, "is not set"),
        ("", "is not set"),
        ("main", "branch or tag name"),
        ("v1.0", "branch or tag name"),
        ("refs/pr/1", "branch or tag name"),
        ("9e165c30", "not a full commit sha"),
        (SHA.upper(), "not a full commit sha"),
        (SHA + "0", "not a full commit sha"),
    ],
)
def test_pin_error(value, fragment):
    error = w.pin_error("sglang_engine.model_revision", value)
    if fragment is None:
        assert error is None
    else:
        assert fragment in error
        assert "sglang_engine.model_revision" in error
        assert "fix:" in error


@pytest.mark.parametrize(
    ("path", "volumes", "expected"),
    [
        (
            "/out/chat-template-sglang.jinja",
            SEED_VOLUMES,
            "/home/tiger/.config/qwen38/chat-template-sglang.jinja",
        ),
        ("/root/.cache/huggingface", SEED_VOLUMES, "/home/tiger/.cache/huggingface"),
        ("/home/tiger/models/A/B", SEED_VOLUMES, "/home/tiger/models/A/B"),
        ("/models/x", ["/srv/models:/models:ro"], "/srv/models/x"),
        ("/models/x", ["/srv:/", "/srv/models:/models"], "/srv/models/x"),
        ("/modelsx/y", ["/srv/models:/models"], None),
        ("/nowhere/x", SEED_VOLUMES, None),
        ("relative/x", SEED_VOLUMES, None),
    ],
)
def test_container_to_host(path, volumes, expected):
    assert w.container_to_host(path, volumes) == expected


def seed_engine(**changes):
    engine = {
        "model_repo": "RadixArk/Qwen3.8-27B-NVFP4-BF16-LMHead",
        "model_revision": "a" * 40,
        "model_path": "/home/tiger/models/RadixArk/Qwen3.8-27B-NVFP4-BF16-LMHead",
        "chat_template": "/out/chat-template-sglang.jinja",
        "speculative": {
            "draft_model_path": "z-lab/Qwen3.8-27B-DFlash2",
            "draft_model_revision": SHA,
        },
        "container": {"volumes": list(SEED_VOLUMES)},
    }
    engine.update(changes)
    return engine


@pytest.mark.parametrize(
    ("changes", "names", "error"),
    [
        ({}, ["model", "draft"], None),
        ({"speculative": {"draft_model_path": None}}, ["model"], None),
        ({"speculative": {"draft_model_path": "/models/local-draft"}}, ["model"], None),
        ({"model_revision": None}, ["model", "draft"], "sglang_engine.model_revision is not set"),
        ({"model_revision": "main"}, ["model", "draft"], "branch or tag name"),
        (
            {"speculative": {"draft_model_path": "z-lab/D", "draft_model_revision": "main"}},
            ["model", "draft"],
            "draft_model_revision 'main' is a branch",
        ),
        (
            {"container": {"volumes": ["/home/tiger/models:/home/tiger/models"]}},
            ["model"],
            "no Hugging Face cache",
        ),
        ({"container": {"volumes": []}}, [], "not under any of the profile's container volumes"),
        ({"model_repo": ""}, ["model", "draft"], "model_repo is empty"),
    ],
)
def test_plan(changes, names, error):
    out = w.plan(seed_engine(**changes))
    assert [i["name"] for i in out["stage"]] == names
    if error is None:
        assert out["errors"] == []
    else:
        assert any(error in e for e in out["errors"]), out["errors"]


def test_plan_paths_of_the_seed_profile():
    out = w.plan(seed_engine())
    model, draft = out["stage"]
    assert out["store"] == "/home/tiger/models/.sparkfleet-weights"
    assert model["link"] == "/home/tiger/models/RadixArk/Qwen3.8-27B-NVFP4-BF16-LMHead"
    assert model["template_name"] == "chat-template-sglang.jinja"
    assert model["template_dest"] == "/home/tiger/.config/qwen38/chat-template-sglang.jinja"
    assert draft["hf_hub"] == "/home/tiger/.cache/huggingface/hub"
    assert draft["commit"] == SHA


def test_tree_entries_lfs_and_plain():
    tree = [
        {"type": "directory", "path": "sub", "oid": "x"},
        {"type": "file", "path": "config.json", "size": 10, "oid": "c" * 40},
        {
            "type": "file",
            "path": "model.safetensors",
            "size": 131,
            "oid": "d" * 40,
            "lfs": {"oid": "e" * 64, "size": 5000, "pointerSize": 131},
        },
    ]
    out = w.tree_entries(tree)
    assert [e["path"] for e in out] == ["config.json", "model.safetensors"]
    assert out[0] == {
        "path": "config.json",
        "size": 10,
        "sha256": None,
        "git_oid": "c" * 40,
        "etag": "c" * 40,
    }
    assert out[1]["size"] == 5000 and out[1]["sha256"] == "e" * 64 and out[1]["etag"] == "e" * 64


def test_verify_file_lfs_and_git(tmp_path):
    data = b"weights" * 100
    path = tmp_path / "f"
    path.write_bytes(data)
    sha = hashlib.sha256(data).hexdigest()
    git = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    assert w.verify_file(str(path), {"size": len(data), "sha256": sha})[0]
    entry = {"size": len(data), "sha256": None, "git_oid": git}
    assert w.verify_file(str(path), entry)[0]
    assert entry["sha256"] == sha  # filled in for the manifest
    ok, expected, got = w.verify_file(str(path), {"size": len(data), "sha256": "0" * 64})
    assert not ok and expected == "sha256 " + "0" * 64 and got == "sha256 " + sha
    ok, expected, got = w.verify_file(str(path), {"size": 1, "sha256": sha})
    assert not ok and got == f"{len(data)} bytes"
    assert w.verify_file(str(tmp_path / "absent"), {"size": 1, "sha256": sha})[2] == "missing"


def test_files_to_rehash_follows_stat(tmp_path):
    manifest = {"files": [{"path": "a"}, {"path": "b"}]}
    for name in "ab":
        (tmp_path / name).write_bytes(name.encode())
    stats = {n: w.stat_record(str(tmp_path / n)) for n in "ab"}
    verified = {n: dict(stats[n], sha256="x") for n in "ab"}
    assert w.files_to_rehash(manifest, verified, stats) == []
    assert w.files_to_rehash(manifest, verified, stats, full=True) == ["a", "b"]
    os.utime(tmp_path / "b", ns=(1, 1))
    stats["b"] = w.stat_record(str(tmp_path / "b"))
    assert w.files_to_rehash(manifest, verified, stats) == ["b"]
    assert w.files_to_rehash(manifest, {}, stats) == ["a", "b"]


@pytest.mark.parametrize(
    ("needed", "free", "headroom", "fragment"),
    [
        (10, 100, 0, None),
        (100, 100, 0, None),
        (100, 100, 1, "1 B headroom"),
        (3 * 2**30, 2**30, 0, "has 1.0 GiB free, staging the weights needs 3.0 GiB"),
    ],
)
def test_disk_error(needed, free, headroom, fragment):
    error = w.disk_error(
        "spark-3", "/home/tiger/models/.sparkfleet-weights", needed, free, headroom
    )
    if fragment is None:
        assert error is None
    else:
        assert error.startswith("spark-3: /home/tiger/models/.sparkfleet-weights has")
        assert fragment in error


@pytest.mark.parametrize(
    ("manifest", "fragment"),
    [
        ({"repo": "o/r", "commit": SHA, "files": [{"path": "x"}]}, None),
        (None, "no readable manifest"),
        ({"repo": "o/other", "commit": SHA, "files": [{"path": "x"}]}, "names repo"),
        ({"repo": "o/r", "commit": "b" * 40, "files": [{"path": "x"}]}, "names commit"),
        ({"repo": "o/r", "commit": SHA, "files": []}, "lists no files"),
    ],
)
def test_manifest_matches(manifest, fragment):
    error = w.manifest_matches(manifest, "o/r", SHA)
    assert (error is None) if fragment is None else (fragment in error)


@pytest.mark.parametrize(
    ("text", "disabled", "hint"),
    [
        ("Client error '401 Unauthorized' for url '.../xet-read-token/abc'", False, True),
        ("XetDownloadError: token refused", False, True),
        ("Client error '401 Unauthorized'", True, False),
        ("Connection refused", False, False),
    ],
)
def test_xet_hint(text, disabled, hint):
    out = w.xet_hint(text, disabled)
    assert (out is not None and "HF_HUB_DISABLE_XET=1" in out) if hint else out is None


def test_names_and_layout():
    assert w.repo_key("z-lab/Qwen3.8-27B-DFlash2") == "z-lab--Qwen3.8-27B-DFlash2"
    assert w.hf_cache_dirname("z-lab/D") == "models--z-lab--D"
    assert w.revision_dir("/s", "o/r", SHA) == f"/s/o--r/{SHA}"
    assert w.partial_dir("/s", "o/r", SHA) == f"/s/o--r/.{SHA}.partial"
    assert "50.0%" in w.progress_line(5, 10, 1, 3)


def test_stat_records_list_only_the_manifest_files_present(tmp_path):
    (tmp_path / "a.bin").write_bytes(b"abc")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.json").write_text("{}")
    (tmp_path / "extra").write_text("not in the manifest")
    files = [{"path": "a.bin"}, {"path": "sub/b.json"}, {"path": "missing.bin"}]
    got = w.stat_records(str(tmp_path), files)
    assert sorted(got) == ["a.bin", "sub/b.json"]
    assert got["a.bin"] == w.stat_record(str(tmp_path / "a.bin"))


# Repair (issue 21): a corrupt copy leaves the revision, a verified one is renamed in.


def _revision(tmp_path):
    from weights_fakes import COMMIT, REPO, manifest, stage

    store = tmp_path / "store"
    final = stage(store)
    return final, w.partial_dir(str(store), REPO, COMMIT), manifest()


@pytest.mark.parametrize(
    ("arrived", "error"),
    [
        ({"model-00002-of-00002.safetensors": None}, None),
        ({}, "model-00002-of-00002.safetensors: expected [0-9a-f]{64}, got missing"),
        ({"model-00002-of-00002.safetensors": b"x"}, "model-00002-of-00002.safetensors: expected"),
    ],
)
def test_complete_renames_verified_replacements_in_and_always_removes_the_staging(
    tmp_path, arrived, error
):
    from weights_fakes import FILES

    final, part, man = _revision(tmp_path)
    os.unlink(os.path.join(final, "model-00002-of-00002.safetensors"))
    os.makedirs(part)
    for path, data in arrived.items():
        with open(os.path.join(part, path), "wb") as handle:
            handle.write(FILES[path] if data is None else data)
    if error is None:
        assert w.complete(final, part, man) == ["model-00002-of-00002.safetensors"]
        assert w.check_revision(final, man, full=True)[0] == []
        verified = w.load_json(os.path.join(final, w.VERIFIED))
        assert (
            verified["model-00002-of-00002.safetensors"]["ino"]
            == os.stat(os.path.join(final, "model-00002-of-00002.safetensors")).st_ino
        )
    else:
        with pytest.raises(w.RepairError, match=error):
            w.complete(final, part, man)
        assert not os.path.exists(os.path.join(final, "model-00002-of-00002.safetensors"))
    assert not os.path.exists(part)


def test_complete_checks_every_replacement_before_moving_any(tmp_path):
    from weights_fakes import FILES

    final, part, man = _revision(tmp_path)
    for path in ("config.json", "model-00002-of-00002.safetensors"):
        os.unlink(os.path.join(final, path))
    os.makedirs(part)
    (tmp_path / "store").joinpath(part, "config.json").write_bytes(FILES["config.json"])
    with pytest.raises(w.RepairError):
        w.complete(final, part, man)
    assert not os.path.exists(os.path.join(final, "config.json")), "nothing half-applied"


def test_isolate_removes_only_what_still_fails(tmp_path):
    from weights_fakes import flip

    final, _part, man = _revision(tmp_path)
    flip(os.path.join(final, "model-00001-of-00002.safetensors"))
    removed, kept = w.isolate(
        final, man, ["model-00001-of-00002.safetensors", "config.json", "not-in-manifest"]
    )
    assert removed == ["model-00001-of-00002.safetensors"] and kept == ["config.json"]
    assert not os.path.exists(os.path.join(final, "model-00001-of-00002.safetensors"))
    assert "model-00001-of-00002.safetensors" not in w.load_json(os.path.join(final, w.VERIFIED))
    assert [e["path"] for e in w.missing_entries(final, man)] == [
        "model-00001-of-00002.safetensors"
    ]


def test_file_states_and_the_scrub_report():
    man = {"files": [{"path": "a"}, {"path": "b"}, {"path": "c"}]}
    bad = [
        {"path": "b", "expected": "sha256 1", "got": "sha256 2"},
        {"path": "c", "expected": "sha256 3", "got": "missing"},
    ]
    assert [r["state"] for r in w.file_states(man, bad)] == ["ok", "corrupt", "missing"]
    results = [
        {
            "item": {"repo": "o/m", "commit": SHA},
            "status": "corrupt",
            "files": w.file_states(man, bad),
        },
        {"item": {"repo": "o/d", "commit": SHA}, "status": "absent"},
    ]
    lines = w.scrub_lines(w.scrub_rows("spark-3", results))
    assert lines[0].split() == ["node", "state", "file", "revision"]
    assert lines[1].split() == ["spark-3", "ok", "a", "o/m@" + SHA[:12]]
    assert (
        lines[2].startswith("spark-3  CORRUPT  b ")
        and "(expected sha256 1, got sha256 2)" in lines[2]
    )
    assert lines[3].split()[:3] == ["spark-3", "MISSING", "c"]
    assert "ABSENT" in lines[4] and "(revision not staged)" in lines[4]
    assert lines[5] == "4 files on 1 nodes: 1 ok, 1 corrupt, 1 missing, 1 absent"
    assert "nothing was changed; repair with" in lines[6] and "-e repair=true" in lines[6]
    assert "repairing" in w.scrub_lines(w.scrub_rows("spark-3", results), repair=True)[6]
    healthy = [
        {
            "item": {"repo": "o/m", "commit": SHA},
            "status": "present",
            "files": w.file_states(man, []),
        }
    ]
    ok_only = w.scrub_lines(w.scrub_rows("spark-1", healthy))
    assert ok_only[-1] == "3 files on 1 nodes: 3 ok"
