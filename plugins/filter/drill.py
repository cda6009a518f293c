# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The fault drills of playbooks/drill.yml: the catalogue, the plan and every refusal.

One home for what a drill is (its target and its fault) and for when the playbook
refuses to run: the role's tasks only carry the plan out.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkfleet.serving.plugins.plugin_utils import _control

# name: (target, fault, what the operator reads). Run in this order, one at a time.
CATALOGUE = {
    "head_kill": ("head", "kill", "kill the head's engine container (docker kill)"),
    "worker_kill": ("worker", "kill", "kill a worker's engine container (docker kill)"),
    "head_freeze": (
        "head",
        "freeze",
        "freeze the head's scheduler process (SIGSTOP; SIGCONT if still frozen after the drill)",
    ),
    "worker_restart": (
        "worker",
        "restart",
        "restart one worker's engine container alone (docker restart)",
    ),
    "worker_reboot": ("worker", "reboot", "reboot a worker node (only with drill_allow_reboot)"),
}
ORDER = tuple(CATALOGUE)


def drill_plan(selected, head, worker):
    """Each selected drill in the catalogue's order: {name, node, target, fault, what}."""
    if not isinstance(selected, (list, tuple)):
        raise AnsibleFilterError("drill_plan: the selection must be a list of drill names")
    unknown = sorted(set(selected) - set(CATALOGUE))
    if unknown:
        raise AnsibleFilterError(
            "drill_plan: unknown drill(s) {}; known: {}".format(
                ", ".join(unknown), ", ".join(ORDER)
            )
        )
    plan = []
    for name in ORDER:
        if name in selected:
            target, fault, what = CATALOGUE[name]
            plan.append(
                {
                    "name": name,
                    "node": head if target == "head" else worker,
                    "target": target,
                    "fault": fault,
                    "what": what,
                }
            )
    return plan


def drill_problems(
    status, selected, confirm, cluster, allow_reboot=False, healthy=True, worker="", workers=()
):
    """Why this drill run must not start (a list of messages, empty when it may).

    status: `sparkfleet-watchdog status` of the head (JSON), or None when it could not be read.
    healthy: the head answered /health 200 just now.
    """
    problems = []
    refused = _control.confirm_problem(
        "drills inject faults into", "drill_confirm", confirm, cluster
    )
    if refused:
        problems.append(refused)
    if not isinstance(selected, (list, tuple)) or not selected:
        problems.append("drill_selected: name at least one drill of {}".format(", ".join(ORDER)))
        selected = []
    unknown = sorted(set(selected) - set(CATALOGUE))
    if unknown:
        problems.append(
            "drill_selected: unknown drill(s) {}; known: {}".format(
                ", ".join(unknown), ", ".join(ORDER)
            )
        )
    if len(set(selected)) != len(selected):
        problems.append("drill_selected: each drill runs once per run; remove the repeats")
    if "worker_reboot" in selected and not allow_reboot:
        problems.append(
            "drill_selected names worker_reboot, which reboots a node: set "
            "-e drill_allow_reboot=true to allow it, or leave it out"
        )
    needs_worker = any(CATALOGUE[n][0] == "worker" for n in selected if n in CATALOGUE)
    if needs_worker and worker not in workers:
        problems.append(
            f"drill_worker {worker!r} is not a worker of this cluster "
            f"(workers: {', '.join(workers) or 'none'}); name one of them"
        )
    if status is None:
        problems.append(
            "refused: the watchdog's state cannot be read on the head "
            "(sparkfleet-watchdog status); run "
            "ansible-playbook sparkfleet.serving.site -i <inventory> first"
        )
        return problems
    for what, detail, fix in _control.blockers(status):
        problems.append(f"refused: {what} ({detail}); drills need a watchdog that acts: {fix}")
    obs = status.get("last_observation") or {}
    last = status.get("last_decision") or {}
    # A restart that just ended healthy is recorded after its observation (the crash it
    # healed): the watchdog's next observation says healthy, the decision already does.
    recovered = last.get("decision") == "recovered" and last.get("time", 0) >= obs.get("time", 0)
    if not healthy or (obs.get("kind") != "healthy" and not recovered):
        problems.append(
            "refused: the cluster is not healthy (head /health {}, the watchdog's last "
            "observation: {} {}); drills start only from a healthy cluster".format(
                "200" if healthy else "not 200", obs.get("kind", "none"), obs.get("reason", "")
            ).rstrip()
        )
    bound = int(status.get("max_restarts") or 0)
    counted = int(status.get("restarts_counted_in_window") or 0)
    fit = max(bound - counted, 0)
    if len(selected) > fit:
        problems.append(
            f"refused: {len(selected)} drill(s) would need {len(selected)} watchdog restart(s), "
            f"but only {fit} fit under its bound (watchdog_max_restarts={bound} per "
            f"{status.get('window_s')} s, {counted} already in the window): select at most {fit}, "
            "or wait for the window to pass"
        )
    return problems


class FilterModule:
    def filters(self):
        return {"drill_plan": drill_plan, "drill_problems": drill_problems}
