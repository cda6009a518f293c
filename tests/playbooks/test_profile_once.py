"""The engine profile is resolved once per run for the same inputs, again when they change.

site.yml includes the sglang role in six plays; each resolution loads a collection filter
in the controller's workers (the largest controller cost of a no-change run, measured by
make bench). A later play reuses the facts when the profile and overrides are the same;
the canary resolves other profiles in the same run and must get them. Runs on localhost
only (no node is contacted).
"""

from __future__ import annotations

import json
import os

from test_validate import REPO, run_playbook

# The include of the resolution: skipped as a whole when the inputs are the same.
RESOLVE = "Resolve the engine profile unless this run already did for the same inputs"

PLAYBOOK = """
- name: First play
  hosts: localhost
  gather_facts: false
  roles:
    - role: sparkfleet.serving.sglang
  tasks:
    - name: Keep the first result
      ansible.builtin.set_fact:
        first: "{{ sglang_engine }}"

- name: Second play, same inputs
  hosts: localhost
  gather_facts: false
  roles:
    - role: sparkfleet.serving.sglang

- name: Third play, other overrides (as the canary's candidates)
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Resolve with other overrides
      ansible.builtin.include_role:
        name: sparkfleet.serving.sglang
      vars:
        sglang_profile_overrides: {max_running_requests: 3}

    - name: Record both
      ansible.builtin.copy:
        dest: "{{ out }}"
        content: "{{ {'first': first, 'third': sglang_engine, 'url': sglang_api_url} | to_json }}"
        mode: "0600"
"""


def _resolutions(tmp_path, playbook, inventory):
    """Run PLAYBOOK on INVENTORY (local connection); per play, the include's results by host."""
    book = tmp_path / "play.yml"
    book.write_text(playbook)
    proc = run_playbook(
        inventory,
        str(book),
        "-c",
        "local",
        "-e",
        f"out={tmp_path / 'out.json'}",
        "-e",
        "spark_mgmt_iface=enP7s7",
        "-e",
        f"ansible_python_interpreter={os.path.join(REPO, '.venv', 'bin', 'python')}",
        ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json",
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    report = json.loads(proc.stdout)
    return [
        task["hosts"]
        for play in report["plays"]
        for task in play["tasks"]
        if task["task"]["name"].endswith(RESOLVE)
    ]


def test_resolved_once_for_the_same_inputs_and_again_for_others(tmp_path):
    results = _resolutions(tmp_path, PLAYBOOK, "localhost,")
    ran = [not hosts["localhost"].get("skipped", False) for hosts in results]
    out = tmp_path / "out.json"
    assert ran == [True, False, True]
    facts = json.loads(out.read_text())
    assert facts["third"]["max_running_requests"] == 3
    assert facts["first"]["max_running_requests"] != 3
    assert facts["url"].startswith("http://")


HOSTS_PLAYBOOK = """
- name: First play, two nodes
  hosts: node-a,node-b
  gather_facts: false
  roles:
    - role: sparkfleet.serving.sglang

- name: Second play, the same nodes and inputs
  hosts: node-a,node-b
  gather_facts: false
  roles:
    - role: sparkfleet.serving.sglang

- name: Third play, a node the earlier plays did not hold
  hosts: node-a,node-b,node-c
  gather_facts: false
  roles:
    - role: sparkfleet.serving.sglang
  tasks:
    - name: Record what each node holds
      ansible.builtin.copy:
        dest: "{{ out }}"
        content: >-
          {{ dict(ansible_play_hosts | zip(ansible_play_hosts
             | map('extract', hostvars, 'sglang_engine') | map(attribute='image'))) | to_json }}
        mode: "0600"
      run_once: true
"""


def test_resolved_once_for_the_play_and_for_a_node_that_lacks_it(tmp_path):
    """One include result a play (not one a node); a node new to the run gets the profile."""
    results = _resolutions(tmp_path, HOSTS_PLAYBOOK, "node-a,node-b,node-c,")
    assert [len(hosts) for hosts in results] == [1, 1, 1], results
    ran = [not next(iter(hosts.values())).get("skipped", False) for hosts in results]
    out = tmp_path / "out.json"
    assert ran == [True, False, True]
    images = json.loads(out.read_text())
    assert set(images) == {"node-a", "node-b", "node-c"}
    assert len(set(images.values())) == 1 and all(images.values())
