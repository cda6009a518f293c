"""The galaxy artefact, as a new user gets it.

The tarball is built from a clean clone of the committed tree (not from this checkout,
whose caches and links a user never has), installed with plain
``ansible-galaxy collection install`` into an empty directory with every proxy
pointing at a closed port, so any attempt to reach Galaxy for a dependency fails the
install. The installed copy then has to document itself and parse its playbooks by
their collection names, as the README tells a user to run them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tarfile

import pytest
import yaml
from packaging.specifiers import SpecifierSet
from packaging.version import Version

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.path.join(REPO, ".venv", "bin")
# Parts of the checkout that are the collection a user installs.
SHIPPED = ("roles", "playbooks", "plugins", "meta")
# A collection reference: an FQCN in YAML/Jinja, an ansible_collections import in Python.
FQCN = re.compile(r"\b([a-z][a-z0-9_]*)\.([a-z][a-z0-9_]*)\.[a-z][a-z0-9_]*\b")
PY_IMPORT = re.compile(r"\bansible_collections\.([a-z][a-z0-9_]*)\.([a-z][a-z0-9_]*)\b")
# Collections every ansible-core has, and this one.
NOT_DEPENDENCIES = {("ansible", "builtin"), ("ansible", "legacy"), ("sparkfleet", "serving")}
# Dotted YAML names that are not collections (Jinja attribute chains on our own variables).
NAMESPACES = {"ansible", "community", "containers", "kubernetes", "cisco", "amazon", "azure"}
ANSI = re.compile(r"\x1b\[[0-9;]*m|\*")  # colour, or the bold marks of ANSIBLE_NOCOLOR
CLOSED = "http://127.0.0.1:9"


def offline_env(collections_path):
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_COLLECTIONS_PATH=collections_path)
    env.pop("ANSIBLE_CONFIG", None)
    for var in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "all_proxy"):
        env[var] = CLOSED
    env["no_proxy"] = env["NO_PROXY"] = ""
    return env


def run(cmd, cwd, env=None, timeout=300):
    proc = subprocess.run(
        cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False, timeout=timeout
    )
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def artefact(tmp_path_factory):
    root = tmp_path_factory.mktemp("artefact")
    clone = root / "clone"
    head = run(["git", "rev-parse", "HEAD"], REPO).stdout.strip()
    run(["git", "clone", "-q", REPO, str(clone)], root)
    run(["git", "checkout", "-q", head], clone)
    # cwd outside the checkout and no ANSIBLE_CONFIG: the clone's own ansible.cfg is not read
    env = offline_env(str(root / "none"))
    run(
        [f"{BIN}/ansible-galaxy", "collection", "build", str(clone), "--output-path", str(root)],
        root,
        env,
    )
    (tarball,) = root.glob("sparkfleet-serving-*.tar.gz")
    install = root / "installed"
    proc = run(
        [f"{BIN}/ansible-galaxy", "collection", "install", str(tarball), "-p", str(install)],
        root,
        env,
    )
    return {
        "root": root,
        "clone": clone,
        "tarball": tarball,
        "install": install,
        "install_log": proc.stdout + proc.stderr,
        "env": offline_env(str(install)),
    }


def test_tarball_holds_the_collection_and_nothing_of_the_twin(artefact):
    with tarfile.open(artefact["tarball"]) as tar:
        names = set(tar.getnames())
        manifest = json.load(tar.extractfile("MANIFEST.json"))
    assert "LICENSE" in names
    assert "meta/runtime.yml" in names
    assert "roles/preflight/meta/argument_specs.yml" in names
    for absent in ("ansible.cfg", "Makefile", "requirements-dev.yml", "requirements.txt"):
        assert absent not in names, absent
    for prefix in (
        "molecule/",
        "twin/",
        "tests/",
        "tools/",
        "inventory/sim",
        ".collections",
        ".venv",
    ):
        assert not [n for n in names if n.startswith(prefix)], prefix
    assert manifest["collection_info"]["license"] == ["GPL-3.0-or-later"]


def test_dependencies_are_what_the_shipped_content_uses(artefact):
    used = set()
    for top in SHIPPED:
        for dirpath, _dirs, files in os.walk(artefact["clone"] / top):
            for name in files:
                if not name.endswith((".yml", ".yaml", ".py", ".j2")):
                    continue
                with open(os.path.join(dirpath, name), encoding="utf-8") as handle:
                    text = handle.read()
                if name.endswith(".py"):
                    used.update(PY_IMPORT.findall(text))
                else:
                    used.update(p for p in FQCN.findall(text) if p[0] in NAMESPACES)
    used -= NOT_DEPENDENCIES
    with tarfile.open(artefact["tarball"]) as tar:
        manifest = json.load(tar.extractfile("MANIFEST.json"))
    declared = {tuple(name.split(".")) for name in manifest["collection_info"]["dependencies"]}
    assert declared == used, (
        f"galaxy.yml declares {sorted(declared)}, shipped content uses {sorted(used)}"
    )


def test_installs_offline_and_carries_its_license(artefact):
    base = artefact["install"] / "ansible_collections" / "sparkfleet" / "serving"
    assert (base / "MANIFEST.json").is_file(), artefact["install_log"]
    assert "GNU GENERAL PUBLIC LICENSE" in (base / "LICENSE").read_text(encoding="utf-8")
    assert not (base / "ansible.cfg").exists()
    # nothing else was pulled in: the install is the collection alone
    assert sorted(p.name for p in (artefact["install"] / "ansible_collections").iterdir()) == [
        "sparkfleet"
    ]


def test_installed_collection_documents_itself_and_runs_by_name(artefact):
    env = artefact["env"]
    cwd = artefact["root"]
    doc = run([f"{BIN}/ansible-doc", "-t", "role", "sparkfleet.serving.preflight"], cwd, env)
    assert "ENTRY POINT: main" in ANSI.sub("", doc.stdout)
    doc = run([f"{BIN}/ansible-doc", "sparkfleet.serving.roce_link"], cwd, env)
    assert "mtu" in doc.stdout
    inventory = cwd / "hosts.yml"
    inventory.write_text(
        yaml.safe_dump({"spark_nodes": {"hosts": {"spark-1": {}}}}), encoding="utf-8"
    )
    for playbook in ("site", "validate", "status", "restart"):
        run(
            [
                f"{BIN}/ansible-playbook",
                f"sparkfleet.serving.{playbook}",
                "-i",
                str(inventory),
                "--syntax-check",
            ],
            cwd,
            env,
        )


def test_requires_ansible_admits_the_running_and_newer_releases():
    with open(os.path.join(REPO, "meta", "runtime.yml"), encoding="utf-8") as handle:
        spec = SpecifierSet(yaml.safe_load(handle)["requires_ansible"])
    from ansible.release import __version__

    assert Version(__version__) in spec
    major, minor = Version(__version__).release[:2]
    # an upper bound must be a measured incompatibility, written down here when it exists
    assert Version(f"{major}.{minor + 1}.0") in spec
    assert Version(f"{major}.{minor + 3}.0") in spec
