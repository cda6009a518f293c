"""Every stage decided at once (converge_decide stage=all, site.yml's early end).

A node whose probe reading (set here as the fact the probe publishes) holds every stage's
stamp with the digest each stage's own decision computes, the live state the stages left
and the rank on its recorded configuration is quiet; each kind of difference makes it not
quiet, naming the stage. The launch's inputs from earlier stages are taken from their
records, as an earlier stage that is not entered publishes them.
"""

from __future__ import annotations

import json
import os

from test_validate import REPO, run_playbook

INVENTORY = """
all:
  hosts:
    h1: {}
  vars:
    ansible_connection: local
    ansible_python_interpreter: %s
"""

ROCE_NODE = {
    "iface": "enp1s0f0np0",
    "hca": "rocep1s0f0",
    "address": "10.0.30.1",
    "gid_index": 3,
    "gid_port": 1,
    "gid": "0000:0000:0000:0000:0000:ffff:0a00:1e01",
    "netdev": "enp1s0f0np0",
}
PATCHES_NODE = {"image_id": "sha256:" + "a" * 64, "sha256": ["b" * 64]}

PLAYBOOK = (
    """
- name: Decide every stage at once
  hosts: h1
  gather_facts: false
  vars:
    converge_dir: /var/lib/sparkfleet/converge
    preflight_cluster: {nodes: [{host: h1, spark_rank: 0}]}
    spark_rank: 0
    sglang_engine: {container_name: qwen, image: "sglang:1"}
    model_weights_enabled: false
    roce_iface: enp1s0f0np0
    roce_mtu: 9000
    roce_ipv4: 10.0.30.1
    roce_subnet: 10.0.30.0/24
    roce_node: __ROCE__
    sglang_patches_node: __PATCHES__
    stages: [roce, patches, launch, control, watchdog]
    results: {}
    # What the probe reads on a node that converged: no stamp yet (first decisions).
    live:
      nics: {enp1s0f0np0: {exists: true, mtu: 9000, ipv4: [10.0.30.1/24]}}
      gids:
        - {found: true, index: 3, port: 1, hca: rocep1s0f0, netdev: enp1s0f0np0,
           gid: "0000:0000:0000:0000:0000:ffff:0a00:1e01"}
      peers: {}
      images: {"sglang:1": {exists: true, id: "sha256:__A64__"}}
      containers: {qwen-r0: {running: true, labels: {sparkfleet.config: cfg1}}}
      weights: {}
    converge_node: >-
      {% set st = {} %}{% for s in stages %}{% set _ = st.update({converge_dir ~ '/' ~ s ~ '.json':
      {'exists': false}}) %}{% endfor %}{{ live | combine({'stamps': st}) }}
  tasks:
    - name: Each stage decides alone (their digests, nothing recorded yet)
      sparkfleet.serving.converge_decide:
        stage: "{{ item }}"
      loop: "{{ stages }}"

    - name: Record every stage as converged, with what each published
      ansible.builtin.set_fact:
        converge_node: "{{ live | combine({'stamps': __stamps}) }}"
        recorded_node: "{{ live | combine({'stamps': __stamps}) }}"
        converge_recorded:
          roce: {roce_node: "{{ roce_node }}"}
          patches: {sglang_patches_node: "{{ sglang_patches_node }}"}
          launch: {sglang_node_config_hash: cfg1}
      vars:
        __outputs:
          roce: {roce_node: "{{ roce_node }}"}
          patches: {sglang_patches_node: "{{ sglang_patches_node }}"}
          launch: {sglang_node_config_hash: cfg1}
        __stamps: >-
          {% set out = {} %}{% for s in stages %}{% set _ = out.update({
          converge_dir ~ '/' ~ s ~ '.json': {'exists': true, 'content':
          {'version': 1, 'stage': s, 'digest': converge_digests[s], 'paths': {},
           'outputs': __outputs[s] | default({})}, 'actual': {}}}) %}{% endfor %}{{ out }}

    - name: Decide at once, nothing differs
      ansible.builtin.include_tasks: all.yml
      vars:
        label: converged

    - name: Decide at once, the launch's earlier stage published another row than recorded (ignored)
      ansible.builtin.include_tasks: all.yml
      vars:
        label: published_ignored
        roce_node: {gid_index: 9}

    - name: Decide at once, one input of the launch differs
      ansible.builtin.include_tasks: all.yml
      vars:
        label: input
        sglang_node_log_max_files: 3

    - name: Decide at once, one input of the control path and the watchdog differs
      ansible.builtin.include_tasks: all.yml
      vars:
        label: input_two
        watchdog_interval_s: 5

    - name: Decide at once, the GID row moved
      ansible.builtin.include_tasks: all.yml
      vars:
        label: gid
        converge_node: >-
          {{ recorded_node | combine({'gids': [live.gids[0] | combine({'index': 7})]}) }}

    - name: Decide at once, the rank runs another configuration
      ansible.builtin.include_tasks: all.yml
      vars:
        label: rank
        converge_node: >-
          {{ recorded_node | combine({'containers': {'qwen-r0': {'running': true,
             'labels': {'sparkfleet.config': 'old'}}}}) }}

    - name: Decide at once, a restart asked for
      ansible.builtin.include_tasks: all.yml
      vars:
        label: force
        sglang_node_force_restart: true

    - name: Decide at once, converge_skip off
      ansible.builtin.include_tasks: all.yml
      vars:
        label: skip_off
        converge_skip: false

    - name: Write what was decided
      ansible.builtin.copy:
        dest: "{{ out }}/quiet.json"
        content: "{{ results | to_json }}"
        mode: "0600"
""".replace("__ROCE__", json.dumps(ROCE_NODE))
    .replace("__PATCHES__", json.dumps(PATCHES_NODE))
    .replace("__A64__", "a" * 64)
)

ALL = """
- name: Decide every stage at once
  sparkfleet.serving.converge_decide:
    stage: all
  register: decided

- name: Note it
  ansible.builtin.set_fact:
    results: >-
      {{ results | combine({label: {'quiet': converge_quiet, 'reasons': decided.reasons}}) }}
"""


def test_every_stage_at_once_is_quiet_only_when_nothing_differs(tmp_path):
    (tmp_path / "hosts.yml").write_text(INVENTORY % os.path.join(REPO, ".venv", "bin", "python"))
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    (tmp_path / "all.yml").write_text(ALL)
    out = tmp_path / "out"
    out.mkdir()
    proc = run_playbook(str(tmp_path / "hosts.yml"), str(tmp_path / "play.yml"), "-e", f"out={out}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    seen = json.loads((out / "quiet.json").read_text())
    assert seen["converged"] == {"quiet": True, "reasons": {}}
    # The launch reads the earlier stages' records, as they publish them when not entered.
    assert seen["published_ignored"] == {"quiet": True, "reasons": {}}
    assert seen["input"]["quiet"] is False
    assert list(seen["input"]["reasons"]) == ["launch"]
    assert "inputs of stage launch changed" in seen["input"]["reasons"]["launch"][0]
    assert list(seen["input_two"]["reasons"]) == ["control", "watchdog"]
    assert seen["gid"]["quiet"] is False
    assert list(seen["gid"]["reasons"]) == ["roce"]
    assert "GID row moved: index 7" in seen["gid"]["reasons"]["roce"][0]
    assert seen["rank"]["reasons"] == {"bringup": ["qwen-r0: runs configuration old, current cfg1"]}
    assert seen["force"]["reasons"] == {"bringup": ["sglang_node_force_restart is on"]}
    assert seen["skip_off"]["reasons"] == {"all": ["converge_skip is off"]}
