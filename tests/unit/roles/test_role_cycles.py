"""No role includes a role that includes it back (issue 45).

A role's tasks that include another role (``include_role`` or ``import_role`` of
``sparkfleet.serving.X``, whatever ``tasks_from``), and a role's ``meta/main.yml``
dependencies, are edges of a graph of the collection's roles. A cycle in it (converge's
``entered`` including the watchdog's ``hold`` while the watchdog includes converge's
``entered``) ties the roles together: neither can change, be documented or be loaded on
its own. The base role ``cluster``, which every role depends on, includes no other role.
"""

from __future__ import annotations

import glob
import os

import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
PREFIX = "sparkfleet.serving."
INCLUDES = (
    "ansible.builtin.include_role",
    "ansible.builtin.import_role",
    "include_role",
    "import_role",
)
ROLES = sorted(os.path.basename(p) for p in glob.glob(os.path.join(REPO, "roles", "*")))


def _walk(node):
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def _load_all(path):
    with open(path, encoding="utf-8") as handle:
        return [doc for doc in yaml.safe_load_all(handle) if doc is not None]


def _role_name(name):
    """The collection's role a name calls (``sparkfleet.serving.X`` or a bare ``X``), else None."""
    name = str(name or "")
    if name.startswith(PREFIX):
        return name[len(PREFIX) :]
    return name if name in ROLES else None


def role_edges(repo=REPO):
    """{role: {included role: [where, ...]}} from every tasks file and meta/main.yml."""
    edges = {}
    for role in sorted(os.path.basename(p) for p in glob.glob(os.path.join(repo, "roles", "*"))):
        found = edges.setdefault(role, {})
        tasks = glob.glob(os.path.join(repo, "roles", role, "tasks", "**", "*.yml"), recursive=True)
        for path in sorted(tasks):
            where = os.path.relpath(path, repo)
            for doc in _load_all(path):
                for node in _walk(doc):
                    for key in INCLUDES:
                        args = node.get(key)
                        name = args.get("name") if isinstance(args, dict) else args
                        if isinstance(name, str) and name.startswith(PREFIX):
                            target = name[len(PREFIX) :]
                            label = f"{where} ({key} {name}"
                            if isinstance(args, dict) and args.get("tasks_from"):
                                label += f" tasks_from: {args['tasks_from']}"
                            found.setdefault(target, []).append(label + ")")
        meta = os.path.join(repo, "roles", role, "meta", "main.yml")
        if os.path.isfile(meta):
            for doc in _load_all(meta):
                for dep in (doc or {}).get("dependencies") or []:
                    name = dep.get("role", dep.get("name")) if isinstance(dep, dict) else dep
                    target = _role_name(name)
                    if target:
                        where = os.path.relpath(meta, repo)
                        found.setdefault(target, []).append(f"{where} (dependency {name})")
    return edges


def cycles(edges):
    """Every cycle of the graph, each once, as a list of roles from its smallest name."""
    found = set()

    def visit(role, path):
        for target in sorted(edges.get(role, {})):
            if target in path:
                loop = path[path.index(target) :]
                start = loop.index(min(loop))
                found.add(tuple(loop[start:] + loop[:start]))
            else:
                visit(target, [*path, target])

    for role in sorted(edges):
        visit(role, [role])
    return [list(c) for c in sorted(found)]


def _describe(cycle, edges):
    steps = []
    for i, role in enumerate(cycle):
        target = cycle[(i + 1) % len(cycle)]
        steps.append(f"{role} -> {target}: " + "; ".join(edges[role][target]))
    return " | ".join(steps)


def test_the_rule_finds_a_cycle():
    assert cycles({"a": {"b": []}, "b": {"c": []}, "c": {"a": []}}) == [["a", "b", "c"]]
    assert cycles({"a": {"a": []}}) == [["a"]]
    assert cycles({"a": {"b": [], "c": []}, "b": {"c": []}, "c": {}}) == []


def test_the_graph_reads_includes_and_dependencies():
    edges = role_edges()
    # converge:entered includes the preflight's host checks; every role depends on cluster.
    assert "preflight" in edges["converge"]
    assert any("dependency" in w for w in edges["converge"]["cluster"])
    assert any("include_role" in w or "import_role" in w for w in edges["watchdog"]["converge"])


def test_no_role_includes_a_role_that_includes_it_back():
    edges = role_edges()
    found = cycles(edges)
    assert not found, "role include cycles:\n" + "\n".join(
        f"  - {' -> '.join([*c, c[0]])}: {_describe(c, edges)}" for c in found
    )


def test_the_base_role_includes_no_other_role():
    edges = role_edges()
    assert not set(edges["cluster"]) - {"cluster"}, edges["cluster"]
