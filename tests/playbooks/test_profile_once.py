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


def test_resolved_once_for_the_same_inputs_and_again_for_others(tmp_path):
    book = tmp_path / "play.yml"
    book.write_text(PLAYBOOK)
    out = tmp_path / "out.json"
    proc = run_playbook(
        "localhost,",
        str(book),
        "-c",
        "local",
        "-e",
        f"out={out}",
        "-e",
        "spark_mgmt_iface=enP7s7",
        "-e",
        f"ansible_python_interpreter={os.path.join(REPO, '.venv', 'bin', 'python')}",
        ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json",
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    report = json.loads(proc.stdout)
    ran = []
    for play in report["plays"]:
        for task in play["tasks"]:
            if task["task"]["name"].endswith(RESOLVE):
                result = task["hosts"]["localhost"]
                ran.append(not result.get("skipped", False))
    assert ran == [True, False, True]
    facts = json.loads(out.read_text())
    assert facts["third"]["max_running_requests"] == 3
    assert facts["first"]["max_running_requests"] != 3
    assert facts["url"].startswith("http://")
