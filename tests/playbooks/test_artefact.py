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
# A Markdown link's target and a fenced block, as tests/unit/test_docs_pages.py reads them.
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
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
    # what Galaxy's importer and a reader of the installed copy need
    assert {f"roles/{r}/README.md" for r in ("preflight", "watchdog")} <= names
    assert {"docs/real-cluster.md", "docs/docsite/extra-docs.yml"} <= names
    for absent in (
        "ansible.cfg",
        "Makefile",
        "requirements-dev.yml",
        "requirements.txt",
        "execution-environment.yml",
    ):
        assert absent not in names, absent
    for prefix in (
        "molecule/",
        "twin/",
        "tests/",
        "tools/",
        "bench/",
        "inventory/sim",
        ".collections",
        ".venv",
    ):
        assert not [n for n in names if n.startswith(prefix)], prefix
    assert manifest["collection_info"]["license"] == ["GPL-3.0-or-later"]


def broken_links(names, read):
    """Relative links of the shipped Markdown pages whose target the tarball does not carry.

    ``names`` are the tarball's members (files and directories), ``read(name)`` a member's
    text. tests/unit/test_docs_pages.py checks the same links (and anchors) in the checkout;
    build_ignore leaves out what a clone has and a tarball does not.
    """
    broken = []
    for page in sorted(n for n in names if n.endswith(".md")):
        for target in LINK.findall(FENCE.sub("", read(page))):
            file = target.partition("#")[0]
            if re.match(r"[a-z]+:", target) or not file:
                continue
            dest = os.path.normpath(os.path.join(os.path.dirname(page), file))
            if dest not in names:
                broken.append(f"{page} -> {target}")
    return broken


def test_shipped_pages_link_only_to_what_ships(artefact):
    with tarfile.open(artefact["tarball"]) as tar:
        names = set(tar.getnames())
        pages = [n for n in names if n.endswith(".md")]
        assert len(pages) >= 20, pages
        broken = broken_links(names, lambda n: tar.extractfile(n).read().decode("utf-8"))
    assert not broken, "links to files the tarball leaves out (galaxy.yml build_ignore):\n" + (
        "\n".join(broken)
    )
    # the example inventory's settings for an installed collection's user ship with it
    assert "inventory/qwen38-tp4/ansible.cfg" in names


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


def readme_blocks():
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as handle:
        text = handle.read()
    start = text.index("## Quickstart on a real cluster")
    end = text.index("\n## ", start + 10)
    return re.findall(r"```(\w+)\n(.*?)```", text[start:end], re.S)


def test_the_readme_quickstart_works_on_a_copied_inventory(artefact):
    """Steps 3-5 of the README quickstart, as written, on the installed collection.

    Only what needs a person is replaced: the editor, the vault password prompt (a
    password file) and the home directory (a temporary one). validate connects to no node.
    """
    blocks = readme_blocks()
    home = artefact["root"] / "home"
    installed = artefact["install"] / "ansible_collections" / "sparkfleet" / "serving"
    cluster = home / "clusters" / "mycluster"
    password = artefact["root"] / "vault-pass"
    password.write_text("quickstart\n", encoding="utf-8")
    env = dict(artefact["env"], HOME=str(home), EDITOR="true")

    def sh(script, cwd):
        script = script.replace(
            "~/.ansible/collections/ansible_collections/sparkfleet/serving", str(installed)
        )
        script = script.replace("~/", f"{home}/").replace(
            "--ask-vault-pass", f"--vault-password-file {password}"
        )
        script = re.sub(
            r"^ansible-vault (\w+) ",
            rf"ansible-vault \1 --vault-password-file {password} ",
            script,
            flags=re.M,
        )
        script = re.sub(r"^ansible-galaxy collection install .*$", "", script, flags=re.M)
        return run(
            ["bash", "-euo", "pipefail", "-c", script], cwd, dict(env, PATH=f"{BIN}:{env['PATH']}")
        )

    (home / "clusters").mkdir(parents=True)
    install_block = next(b for lang, b in blocks if lang == "sh" and "cp -r" in b)
    sh(install_block, home)
    assert (cluster / "hosts.yml").is_file()

    # the one-line data_dir override and the site profile file, as the README gives them
    override = next(b for lang, b in blocks if lang == "yaml" and "data_dir:" in b)
    profile_block = next(b for lang, b in blocks if lang == "yaml" and "base:" in b)
    (cluster / "profiles").mkdir()
    (cluster / "profiles" / "mymodel.yml").write_text(profile_block, encoding="utf-8")
    cluster_yml = cluster / "group_vars" / "spark_nodes" / "cluster.yml"
    settings = yaml.safe_load(cluster_yml.read_text(encoding="utf-8"))
    settings.update(yaml.safe_load(override))
    settings["sglang_profile"] = "{{ inventory_dir }}/profiles/mymodel.yml"
    # the README's "$EDITOR ... # addresses, NICs, and pin model_revision": validate refuses an
    # unset revision, so the operator's edit pins one
    assert "pin model_revision" in install_block
    settings["sglang_profile_overrides"]["model_revision"] = "0123456789abcdef" * 2 + "01234567"
    cluster_yml.write_text(yaml.safe_dump(settings), encoding="utf-8")

    secrets_block = next(b for lang, b in blocks if lang == "sh" and "ansible-vault encrypt" in b)
    sh(secrets_block, cluster)
    secrets = (cluster / "group_vars" / "spark_nodes" / "secrets.yml").read_text(encoding="utf-8")
    assert secrets.startswith("$ANSIBLE_VAULT;"), secrets
    assert "a-long-random-key" not in secrets

    run_block = next(b for lang, b in blocks if lang == "sh" and "sparkfleet.serving.validate" in b)
    validate = next(
        line for line in run_block.splitlines() if "sparkfleet.serving.validate" in line
    )
    proc = sh(validate.split("#")[0], home)
    assert "failed=0" in proc.stdout and "unreachable=0" in proc.stdout, proc.stdout
    # the vaulted key was read: no warning about an open API without one
    assert "ANYONE ON THAT NETWORK" not in proc.stdout + proc.stderr
    site = next(line for line in run_block.splitlines() if "sparkfleet.serving.site" in line)
    proc = sh(site.split("#")[0] + " --list-tasks --tags launch", home)
    assert "sglang_node : Derive this rank's launch inputs" in proc.stdout
