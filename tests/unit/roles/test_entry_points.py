"""Every call of a role entry point is validated against its argument spec.

ansible-core looks an entry point's spec up by the exact ``tasks_from`` string: a call
that passes ``host.yml`` where the spec is named ``host`` runs the tasks without validating
a single option (issue 20). So every ``tasks_from`` of this collection's roles names an
entry point its spec declares, and every tasks file a playbook enters has a spec.
"""

from __future__ import annotations

import glob
import os

import pytest
import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
PREFIX = "sparkfleet.serving."
SOURCES = ("site.yml", "playbooks", "roles", "molecule", "twin")


def _yaml_files():
    for top in SOURCES:
        path = os.path.join(REPO, top)
        if os.path.isfile(path):
            yield path
        for ext in ("yml", "yaml"):
            yield from glob.glob(os.path.join(path, "**", "*." + ext), recursive=True)


def _walk(node):
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def _role_calls():
    calls = []
    for path in sorted(set(_yaml_files())):
        with open(path, encoding="utf-8") as handle:
            try:
                docs = list(yaml.safe_load_all(handle))
            except yaml.YAMLError:
                continue
        for doc in docs:
            for node in _walk(doc):
                for key in (
                    "ansible.builtin.include_role",
                    "ansible.builtin.import_role",
                    "include_role",
                    "import_role",
                ):
                    args = node.get(key)
                    if isinstance(args, dict) and str(args.get("name", "")).startswith(PREFIX):
                        calls.append((os.path.relpath(path, REPO), args))
    return calls


def _entry_points(role):
    with open(
        os.path.join(REPO, "roles", role, "meta", "argument_specs.yml"), encoding="utf-8"
    ) as handle:
        return set(yaml.safe_load(handle)["argument_specs"])


CALLS = _role_calls()
# Entry points that document, and are never entered: the cluster variables (a role with
# no tasks, in scope through dependencies) and the engine profile's fields.
DOC_ONLY = {("cluster", "main"), ("sglang", "profile")}


def test_calls_found():
    assert any("tasks_from" in args for _path, args in CALLS)


@pytest.mark.parametrize(
    ("path", "args"),
    [c for c in CALLS if "tasks_from" in c[1]],
    ids=lambda v: v if isinstance(v, str) else v.get("tasks_from"),
)
def test_tasks_from_names_a_declared_entry_point(path, args):
    role = args["name"][len(PREFIX) :]
    entry = args["tasks_from"]
    declared = _entry_points(role)
    assert entry in declared, (
        f"{path}: {args['name']} tasks_from: {entry} is not an entry point of "
        f"roles/{role}/meta/argument_specs.yml ({sorted(declared)}); ansible-core would run "
        f"it without validating its options: call it as tasks_from: {os.path.splitext(entry)[0]}"
    )
    assert os.path.isfile(os.path.join(REPO, "roles", role, "tasks", entry + ".yml"))


@pytest.mark.parametrize("role", sorted(os.listdir(os.path.join(REPO, "roles"))))
def test_every_entry_point_has_its_tasks_file(role):
    for entry in _entry_points(role):
        if (role, entry) in DOC_ONLY:
            continue
        assert os.path.isfile(os.path.join(REPO, "roles", role, "tasks", entry + ".yml")), (
            f"roles/{role}: entry point {entry} has no tasks/{entry}.yml"
        )
