# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What a playbook refuses offline from its own run variables (extra vars), before any node."""

from __future__ import annotations

from ansible_collections.sparkfleet.serving.plugins.plugin_utils._control import confirm_problem
from ansible_collections.sparkfleet.serving.plugins.plugin_utils._upgrade import (
    offline_problems as upgrade_offline_problems,
)

# The playbooks whose offline checks preflight runs (preflight_playbook): each is refused here,
# before it connects to a node, for what its own run variables (extra vars) lack; validate.yml
# -e preflight_playbook=<name> runs the same. The variables each one reads.
PLAYBOOK_VARS = {
    "site": (),
    "restart": (),
    "status": (),
    "verify": (),
    "bench": (),
    "rollback": (),
    "canary": (),
    "stop": (),
    "upgrade": ("upgrade_image", "upgrade_max_slowdown"),
    "drill": ("drill_confirm", "drill_cleanup_only"),
    "monitoring": ("monitoring_prometheus_host",),
    "teardown": ("teardown_confirm", "teardown_weights"),
}
RUN = "ansible-playbook sparkfleet.serving.{} -i <inventory>"


def _truthy(value):
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def run_problems(playbook, run, cluster):
    """What ``playbook`` refuses offline from its run variables ``run`` (name -> value).

    A variable the run does not set is absent from ``run``. Lines as check_cluster's.
    """
    if playbook not in PLAYBOOK_VARS:
        return [
            f"cluster: preflight_playbook is {playbook!r}, not a playbook of the collection; "
            f"fix: one of {', '.join(sorted(PLAYBOOK_VARS))}"
        ]
    out = []
    if playbook == "upgrade":
        problems = upgrade_offline_problems(
            run.get("upgrade_image"), run.get("upgrade_max_slowdown", 0.05)
        )
        out += [f"cluster: {p}" for p in problems]
    elif playbook == "drill" and not _truthy(run.get("drill_cleanup_only", False)):
        refused = confirm_problem(
            "drills inject faults into", "drill_confirm", run.get("drill_confirm"), cluster
        )
        out += [f"cluster: {refused}"] if refused else []
    elif playbook == "teardown":
        weights = "too" if _truthy(run.get("teardown_weights", False)) else "stay"
        refused = confirm_problem(
            "teardown stops and removes what sparkfleet.serving installed "
            f"(the weights {weights}) on",
            "teardown_confirm",
            run.get("teardown_confirm"),
            cluster,
        )
        out += [f"cluster: {refused}; no node was contacted"] if refused else []
    elif playbook == "monitoring" and not str(run.get("monitoring_prometheus_host") or ""):
        out.append(
            "cluster: monitoring_prometheus_host is not set, so there is no host to write the "
            "scrape targets and alert rules on (the files would land on this controller); fix: "
            "set it in group_vars (the inventory host that runs Prometheus, or localhost only "
            "if it runs on this controller), or pass -e monitoring_prometheus_host=<host>"
        )
    return out
