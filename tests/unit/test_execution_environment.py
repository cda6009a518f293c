"""execution-environment.yml agrees with the collection it packages.

make lint renders it with ``ansible-builder create`` (tools/galaxy-check.sh), which checks
the v3 schema; this checks what the schema cannot: the pins are the ones the collection is
tested with, the collection tarball is where the galaxy stage installs it from, and the
controller-side downloads it documents are the files that do them.
"""

from __future__ import annotations

import os
import re

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as handle:
        return handle.read()


def pins():
    return dict(
        re.findall(r"^([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==(\S+)$", read("requirements.in"), re.M)
    )


def test_version_and_pins_are_the_tested_ones():
    ee = yaml.safe_load(read("execution-environment.yml"))
    assert ee["version"] == 3
    deps = ee["dependencies"]
    assert deps["ansible_core"]["package_pip"] == f"ansible-core=={pins()['ansible-core']}"
    assert f"matplotlib=={pins()['matplotlib']}" in deps["python"]
    assert any(re.match(r"pip\b", p) for p in deps["python"])
    assert any(s.startswith("openssh-client") for s in deps["system"])


def test_the_collection_is_installed_from_the_tarball_the_build_copies_in():
    text = read("execution-environment.yml")
    ee = yaml.safe_load(text)
    (coll,) = ee["dependencies"]["galaxy"]["collections"]
    (build_file,) = ee["additional_build_files"]
    name = os.path.basename(build_file["src"])
    # ansible-builder copies _build/ to /build, where the galaxy stage runs
    assert coll == {"name": f"/build/{build_file['dest']}/{name}", "type": "file"}
    assert f"mv .cache/ee/sparkfleet-serving-*.tar.gz {build_file['src']}" in text


def test_the_controller_side_downloads_it_documents_exist():
    text = read("execution-environment.yml")
    for path in (
        "roles/model_weights/files/hf-requirements.txt",
        "roles/cluster/tasks/wheel_venv.yml",
    ):
        assert path in text, path
        assert os.path.exists(os.path.join(ROOT, path)), path
    assert "-m pip download" in read("roles/cluster/tasks/wheel_venv.yml")
    # Both controller-side downloads go through that one entry point.
    for role, task in (("model_weights", "download.yml"), ("sglang_bench", "main.yml")):
        assert "tasks_from: wheel_venv" in read(f"roles/{role}/tasks/{task}"), role
    for role, var in (
        ("model_weights", "model_weights_wheel_cache"),
        ("sglang_bench", "sglang_bench_wheel_cache"),
        ("sglang_bench", "sglang_bench_results_root"),
        ("canary", "canary_results_dir"),
    ):
        assert var in text and f"\n{var}:" in read(f"roles/{role}/defaults/main.yml"), var
