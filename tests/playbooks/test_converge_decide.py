"""A stage's decision (converge_decide) on two hosts with real stamps.

The stamps are written by the real converge_stamp module and read back by the real probe
(spark_node_info) on localhost; the decision runs as it does in site.yml. Checks: a stage
never recorded runs; recorded with the same inputs it is skipped; an input that differs on
one node enters that node alone (scope node) or every node (across); a play without the
probe and converge_skip=false always enter.
"""

from __future__ import annotations

import json
import os

from test_validate import REPO, run_playbook

INVENTORY = """
all:
  hosts:
    h1: {}
    h2: {}
    h3: {}
  vars:
    ansible_connection: local
    ansible_python_interpreter: %s
"""

PLAYBOOK = """
- name: Decide with stamps
  hosts: h1:h2
  gather_facts: false
  vars:
    converge_dir: "{{ out }}/{{ inventory_hostname }}"
    preflight_cluster: {nodes: [{host: h1, spark_rank: 0}, {host: h2, spark_rank: 1}]}
    stamp: "{{ converge_dir }}/watchdog.json"
    seen: {}
    watchdog_interval_s: 10
  tasks:
    - name: Probe, decide, note
      ansible.builtin.include_tasks: round.yml
      vars:
        label: never_recorded

    - name: Record the stage
      sparkfleet.serving.converge_stamp:
        path: "{{ stamp }}"
        stage: watchdog
        digest: "{{ converge_digests.watchdog }}"
        paths: []
        outputs: {}

    - name: Probe, decide, note
      ansible.builtin.include_tasks: round.yml
      vars:
        label: recorded

    - name: Probe, decide, note (one input differs on h2 only)
      ansible.builtin.include_tasks: round.yml
      vars:
        label: h2_differs
        watchdog_interval_s: "{{ 5 if inventory_hostname == 'h2' else 10 }}"

    - name: Enter on every node when any differs
      sparkfleet.serving.converge_decide:
        stage: watchdog
        across: true

    - name: Note the decision across
      ansible.builtin.set_fact:
        seen: "{{ seen | combine({'across': converge_run.watchdog}) }}"

    - name: Decide with converge_skip off (same inputs)
      sparkfleet.serving.converge_decide:
        stage: watchdog
      vars:
        converge_skip: false

    - name: Write what each host saw
      ansible.builtin.copy:
        dest: "{{ out }}/{{ inventory_hostname }}.json"
        content: "{{ seen | combine({'skip_off': converge_run.watchdog}) | to_json }}"
        mode: "0600"

- name: A play without the probe (the canary's candidates)
  hosts: h3
  gather_facts: false
  tasks:
    - name: Decide without the probe
      sparkfleet.serving.converge_decide:
        stage: launch

    - name: Write it
      ansible.builtin.copy:
        dest: "{{ out }}/noprobe.json"
        content: >-
          {{ {'run': converge_run.launch,
              'reasons': converge_reasons.launch is defined} | to_json }}
        mode: "0600"
"""

ROUND = """
- name: Read the stamp
  sparkfleet.serving.spark_node_info:
    stamps: ["{{ stamp }}"]
  register: probe

- name: Keep it
  ansible.builtin.set_fact:
    converge_node: "{{ probe }}"

- name: Decide
  sparkfleet.serving.converge_decide:
    stage: watchdog

- name: Note
  ansible.builtin.set_fact:
    seen: >-
      {{ seen | combine({label: {'run': converge_run.watchdog,
                                 'reasons': converge_reasons.watchdog}}) }}
"""


def test_a_stage_decision_per_node_and_across_nodes(tmp_path):
    (tmp_path / "hosts.yml").write_text(INVENTORY % os.path.join(REPO, ".venv", "bin", "python"))
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    (tmp_path / "round.yml").write_text(ROUND)
    out = tmp_path / "out"
    out.mkdir()
    proc = run_playbook(
        str(tmp_path / "hosts.yml"),
        str(tmp_path / "play.yml"),
        "-e",
        f"out={out}",
        "-e",
        '{"sglang_engine": {"container_name": "qwen"}}',
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    seen = {h: json.loads((out / f"{h}.json").read_text()) for h in ("h1", "h2")}
    for host in ("h1", "h2"):
        assert seen[host]["never_recorded"]["run"] is True
        assert seen[host]["never_recorded"]["reasons"]
        assert seen[host]["recorded"] == {"run": False, "reasons": []}
        assert seen[host]["across"] is True
        assert seen[host]["skip_off"] is True
    assert seen["h1"]["h2_differs"] == {"run": False, "reasons": []}
    assert seen["h2"]["h2_differs"]["run"] is True
    assert any("changed" in r for r in seen["h2"]["h2_differs"]["reasons"])
    assert json.loads((out / "noprobe.json").read_text()) == {"run": True, "reasons": False}
