"""A variable set from itself (``x: "{{ x }}"`` in a task's or play's vars) loops for ever in
Ansible's templar ("Recursive loop detected"), and only when the task runs: an engine upgrade
that refused found it in its restore. Every task and play of the collection is read here."""

from __future__ import annotations

import glob
import os
import re

import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
FILES = sorted(
    glob.glob(os.path.join(REPO, "roles", "*", "tasks", "*.yml"))
    + glob.glob(os.path.join(REPO, "playbooks", "*.yml"))
    + glob.glob(os.path.join(REPO, "molecule", "*", "*.yml"))
)


def _vars_blocks(node):
    if isinstance(node, dict):
        if isinstance(node.get("vars"), dict):
            yield node["vars"]
        for value in node.values():
            yield from _vars_blocks(value)
    elif isinstance(node, list):
        for item in node:
            yield from _vars_blocks(item)


def self_references(text):
    """The names set from themselves in the vars blocks of one YAML document."""
    found = []
    for block in _vars_blocks(yaml.safe_load(text)):
        for name, value in block.items():
            if isinstance(value, str) and re.search(
                rf"\{{\{{-?\s*{re.escape(str(name))}\b(?!\.|\[)", value
            ):
                found.append(name)
    return found


def test_the_rule_finds_a_variable_set_from_itself():
    assert self_references('- name: t\n  vars:\n    a_bin: "{{ a_bin }}"\n') == ["a_bin"]
    assert self_references('- vars:\n    a: "{{ a | default(1) }}"\n') == ["a"]
    assert self_references('- vars:\n    a: "{{ b }}"\n    c: "{{ a }}"\n') == []


def test_no_task_or_play_sets_a_variable_from_itself():
    bad = {}
    for path in FILES:
        with open(path, encoding="utf-8") as handle:
            names = self_references(handle.read())
        if names:
            bad[os.path.relpath(path, REPO)] = names
    assert not bad, f"variables set from themselves (a template loop): {bad}"
