"""The preload filter and where it is called: the first play of every playbook."""

from __future__ import annotations

import pathlib

import yaml

from ansible_collections.sparkfleet.serving.plugins.filter.controller import FilterModule, preload

REPO = pathlib.Path(__file__).parents[4]


def test_preload_renders_nothing():
    assert preload() == ""
    assert preload({"any": "value"}) == ""
    assert FilterModule().filters() == {"preload": preload}


def test_the_first_play_of_every_playbook_preloads_the_filters_in_its_name():
    # A play name is rendered in the controller's main process, before any worker forks;
    # a task's name or arguments would load the filters in a worker only.
    nodes = yaml.safe_load((REPO / "playbooks" / "nodes.yml").read_text())
    assert "| sparkfleet.serving.preload }}" in nodes[0]["name"]
    for book in sorted((REPO / "playbooks").glob("*.yml")):
        if book.name == "nodes.yml":
            continue
        first = yaml.safe_load(book.read_text())[0]
        assert first.get("ansible.builtin.import_playbook") in ("nodes.yml", "site.yml"), book.name


def test_preload_warms_what_every_stage_decision_reads():
    from ansible_collections.sparkfleet.serving.plugins.filter import converge

    converge._inputs.cache_clear()
    converge._tree.cache_clear()
    preload()
    hits = converge._inputs.cache_info().hits, converge._tree.cache_info().hits
    # What the roce stage's decision computes in a worker: found, not read again.
    converge.converge_inputs(["roce:main"])
    converge._tree(converge._role_dir("roce"))
    assert converge._inputs.cache_info().hits == hits[0] + 1
    assert converge._tree.cache_info().hits == hits[1] + 1
