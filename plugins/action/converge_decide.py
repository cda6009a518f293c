# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Controller side of sparkfleet.serving.converge_decide (no host is contacted).

One task per stage and node: the stage's digest (the values of every option its roles
declare, the cluster's nodes, its roles' files and the plugins) against the stamp the
probe read, plus the caller's live reasons. It replaces three tasks and an include (the
reasons, the decision, the entry point's validation), each of which forked a worker per
node. A stage that acts across nodes runs on every node when any differs: a second call
with ``across`` reads every node's reasons once all of them have their own.
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible.errors import AnsibleActionFail
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.sparkfleet.serving.plugins.filter.converge import (
    converge_cluster_view,
    converge_digest,
    converge_inputs,
    converge_reasons,
)
from ansible_collections.sparkfleet.serving.plugins.module_utils._profile import plain

STAGES = ("roce", "weights", "patches", "launch", "control", "watchdog")
UNDEFINED = "(undefined)"

ARGUMENT_SPEC = dict(
    stage=dict(type="str", required=True, choices=list(STAGES)),
    roles=dict(type="list", elements="str"),
    engine_fields=dict(type="list", elements="str"),
    live=dict(type="list", elements="str", default=[]),
    across=dict(type="bool", default=False),
)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        stage = args["stage"]
        probe = self._value(task_vars, "converge_node", None)
        skip = boolean(self._value(task_vars, "converge_skip", True), strict=False)
        facts = {
            name: dict(self._value(task_vars, name, None) or {})
            for name in ("converge_digests", "converge_reasons", "converge_run")
        }
        if args["across"]:
            differs = self._any_node_differs(task_vars, stage)
        else:
            if not args["roles"]:
                raise AnsibleActionFail("converge_decide: roles is required (unless across)")
            differs = False
            # A play without the probe (the canary rendering its candidates) enters the stage.
            if probe is not None:
                digest = converge_digest(self._values(task_vars, args), args["roles"])
                stamp = "{}/{}.json".format(self._value(task_vars, "converge_dir", None), stage)
                reasons = converge_reasons(probe, stamp, stage, digest) + list(args["live"])
                facts["converge_digests"][stage] = digest
                facts["converge_reasons"][stage] = reasons
                differs = bool(reasons)
        facts["converge_run"][stage] = (not skip) or probe is None or differs
        # The values include secrets (the token, the API key): only their digest is returned.
        result.update(changed=False, ansible_facts=facts)
        return result

    def _value(self, task_vars, name, default):
        if name not in task_vars:
            return default
        return plain(self._templar.template(task_vars[name]))

    def _values(self, task_vars, args):
        """What lookup('vars', *names) gives for the options the stage's roles declare."""
        names = converge_inputs(args["roles"])
        values = {name: self._value(task_vars, name, UNDEFINED) for name in names}
        cluster = self._value(task_vars, "preflight_cluster", None)
        if cluster is None:
            raise AnsibleActionFail(
                "converge_decide: preflight_cluster is not set (role preflight)"
            )
        nodes = cluster.get("nodes", cluster) if isinstance(cluster, Mapping) else cluster
        values["preflight_cluster"] = converge_cluster_view(nodes, names)
        if args["engine_fields"] is not None and "sglang_engine" in names:
            engine = values["sglang_engine"] if isinstance(values["sglang_engine"], Mapping) else {}
            values["sglang_engine"] = {
                k: v for k, v in engine.items() if k in set(args["engine_fields"])
            }
        return values

    def _any_node_differs(self, task_vars, stage):
        hostvars = task_vars.get("hostvars", {})
        for host in task_vars.get("ansible_play_hosts") or []:
            reasons = (hostvars[host].get("converge_reasons") or {}).get(stage)
            if reasons:
                return True
        return False
