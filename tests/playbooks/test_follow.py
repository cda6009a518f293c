"""cluster's follow entry point: one wait per round on the node, not a poll every 2 s.

A background job on localhost (12 s: sleeps, writes its progress file, exits with a known rc) is
followed with rounds of 2 s. The run's JSON record says which module ran how often: the
job's end is asked for twice (at once, then once the round's wait saw it end) whatever its
length, each round is one wait_for, progress lines are printed per round, and the job's own
result (its rc and output) is published as cluster_follow_result.
"""

from __future__ import annotations

import json
import textwrap

from test_validate import run_playbook

PLAY = textwrap.dedent(
    """\
    - name: Follow a job
      hosts: localhost
      connection: local
      gather_facts: false
      vars:
        ansible_python_interpreter: "{{ ansible_playbook_python }}"
      tasks:
        - name: Start the job
          ansible.builtin.shell:
            cmd: |
              for i in $(seq 12); do
                printf '{"line": "step %s of 12"}' "$i" >"@PROGRESS@.tmp"
                mv "@PROGRESS@.tmp" "@PROGRESS@"
                sleep 1
              done
              echo job-said-done; exit @RC@
          async: 60
          poll: 0
          register: job
          changed_when: false
        - name: Follow it
          ansible.builtin.include_role:
            name: sparkfleet.serving.cluster
            tasks_from: follow
          vars:
            cluster_follow_jid: "{{ job.ansible_job_id }}"
            cluster_follow_progress: [cat, "@PROGRESS@"]
            cluster_follow_label: the job
            cluster_follow_round_s: 2
        - name: Show what it published
          ansible.builtin.debug:
            msg: "{{ {'rc': cluster_follow_result.rc, 'stdout': cluster_follow_result.stdout,
                      'finished': cluster_follow_result.finished} | to_json }}"
    """
)


def _follow(tmp_path, rc):
    progress = tmp_path / "progress.json"
    play = tmp_path / "play.yml"
    play.write_text(PLAY.replace("@PROGRESS@", str(progress)).replace("@RC@", str(rc)))
    result = run_playbook("localhost,", str(play), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    ran = {}
    lines, published = [], None
    for play_record in json.loads(result.stdout)["plays"]:
        for task in play_record["tasks"]:
            res = task["hosts"].get("localhost", {})
            if res.get("skipped"):
                continue
            name = task["task"]["name"]
            key = name.split(" : ", 1)[-1]
            key = key.split(" for ", 1)[0].split(" whether ", 1)[0].split(",", 1)[0]
            ran[key] = ran.get(key, 0) + res.get("attempts", 1)
            if name.endswith("Print the progress of the job"):
                lines.append(res["msg"])
            if name == "Show what it published":
                published = json.loads(res["msg"])
    return ran, lines, published


def test_a_round_is_one_wait_and_the_end_is_asked_for_once(tmp_path):
    ran, lines, published = _follow(tmp_path, 0)
    # About 12 s of job: the first ask, rounds of up to 2 s (fewer on a loaded machine, where a
    # round's own tasks take seconds), the last ask. Polling every 2 s asked 4 times or more.
    assert ran["Ask"] == 2, ran
    assert 1 <= ran["Wait a round"] <= 8, ran
    assert len(lines) == ran["Wait a round"], (lines, ran)
    assert all(line.startswith("localhost: the job: step ") for line in lines), lines
    assert published == {"rc": 0, "stdout": "job-said-done", "finished": True}


def test_the_jobs_failure_is_published_not_raised(tmp_path):
    _ran, _lines, published = _follow(tmp_path, 3)
    assert published["rc"] == 3 and published["stdout"] == "job-said-done" and published["finished"]
