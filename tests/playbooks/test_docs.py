"""Every filter, module and role entry point of the collection documents itself.

Names are found from the code (the filters a FilterModule returns, the module files,
every role's main and every tasks file some play or role includes with tasks_from),
not from a list, so a new one without documentation fails here. The documentation is
read back through ansible-doc, as a user reads it.
"""

from __future__ import annotations

import ast
import functools
import glob
import json
import os
import re
import subprocess

import pytest
import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
NS = "sparkfleet.serving"
TASKS_FROM = re.compile(r"name:\s*sparkfleet\.serving\.(\w+)\s*\n\s*tasks_from:\s*([\w.]+)")


def read(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def ansible_doc(kind, names):
    env = dict(
        os.environ,
        ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"),
        ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".collections"),
    )
    proc = subprocess.run(
        [os.path.join(REPO, ".venv", "bin", "ansible-doc"), "-t", kind, "--json", *names],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def filter_names():
    names = []
    for path in glob.glob(os.path.join(REPO, "plugins", "filter", "*.py")):
        tree = ast.parse(read(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name == "filters":
                for ret in ast.walk(node):
                    if isinstance(ret, ast.Return) and isinstance(ret.value, ast.Dict):
                        names += [k.value for k in ret.value.keys]
    return sorted(names)


def module_names():
    return sorted(
        os.path.basename(p)[:-3]
        for p in glob.glob(os.path.join(REPO, "plugins", "modules", "*.py"))
        if not os.path.basename(p).startswith("_")
    )


def role_entry_points():
    wanted = {(os.path.basename(r), "main") for r in glob.glob(os.path.join(REPO, "roles", "*"))}
    for pattern in ("playbooks/*.yml", "roles/*/tasks/*.yml", "*.yml"):
        for path in glob.glob(os.path.join(REPO, pattern)):
            for role, tasks in TASKS_FROM.findall(read(path)):
                wanted.add((role, os.path.splitext(tasks)[0]))
    return sorted(wanted)


def test_the_lists_are_not_empty():
    assert len(filter_names()) >= 6
    assert len(module_names()) >= 5
    assert len(role_entry_points()) >= 5


@pytest.mark.parametrize("kind, names", [("filter", filter_names()), ("module", module_names())])
def test_every_plugin_is_documented(kind, names):
    docs = ansible_doc(kind, [f"{NS}.{n}" for n in names])
    for name in names:
        doc = (docs.get(f"{NS}.{name}") or {}).get("doc") or {}
        assert doc.get("short_description"), f"{kind} {name} is undocumented"
        assert doc.get("description"), f"{kind} {name} has no description"
        assert "UNDOCUMENTED" not in json.dumps(doc), f"{kind} {name}"
        for option, spec in (doc.get("options") or {}).items():
            assert spec.get("description"), f"{kind} {name}: option {option} has no description"
            assert spec.get("type"), f"{kind} {name}: option {option} has no type"


@functools.lru_cache(maxsize=1)
def role_docs():
    """Every role's documentation from one ansible-doc run (a run per entry point cost 35)."""
    roles = sorted(os.path.basename(r) for r in glob.glob(os.path.join(REPO, "roles", "*")))
    return ansible_doc("role", [f"{NS}.{role}" for role in roles])


@pytest.mark.parametrize("role, entry", role_entry_points())
def test_every_role_entry_point_is_documented(role, entry):
    points = role_docs()[f"{NS}.{role}"]["entry_points"]
    assert entry in points, f"role {role}: entry point {entry} has no argument spec"
    assert points[entry].get("short_description"), f"{role}:{entry}"
    for option, spec in (points[entry].get("options") or {}).items():
        assert spec.get("description"), f"{role}:{entry}: {option} has no description"
        assert spec.get("type"), f"{role}:{entry}: {option} has no type"


ROLES_WITH_DEFAULTS = sorted(
    r
    for r in os.listdir(os.path.join(REPO, "roles"))
    if os.path.exists(os.path.join(REPO, "roles", r, "defaults", "main.yml"))
)


@pytest.mark.parametrize("role", ROLES_WITH_DEFAULTS)
def test_role_defaults_are_in_the_argument_spec(role):
    defaults_file = os.path.join(REPO, "roles", role, "defaults", "main.yml")
    defaults = yaml.safe_load(read(defaults_file)) or {}
    specs = yaml.safe_load(read(os.path.join(REPO, "roles", role, "meta", "argument_specs.yml")))
    documented = {o for e in specs["argument_specs"].values() for o in (e.get("options") or {})}
    assert set(defaults) <= documented, set(defaults) - documented
