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
    converge_live,
    converge_reasons,
)
from ansible_collections.sparkfleet.serving.plugins.module_utils._engine import (
    rank_container,
    roce_functions,
)
from ansible_collections.sparkfleet.serving.plugins.plugin_utils._profile import plain

UNDEFINED = "(undefined)"

# Each stage: the role entry points whose argument specs and files make its digest, the
# fields of the resolved profile it reads (None: every field), its live check
# (module_utils/_converge.LIVE), whether it acts across nodes, and the facts it reads that
# an earlier stage publishes (a stage not entered publishes what it recorded).
STAGES = {
    "roce": dict(roles=("roce:main",), live="roce"),
    "weights": dict(
        roles=("model_weights:main",),
        # What model_weights_plan and the prechecks read of the profile (a flag is not ours).
        engine_fields=(
            "container",
            "model_path",
            "model_repo",
            "model_revision",
            "chat_template",
            "speculative",
            "hf_endpoint",
            "hf_disable_xet",
        ),
        live="weights",
        across=True,
        enabled="model_weights_enabled",
    ),
    # The image and what is patched into it (the clamp reads min_new_tokens).
    "patches": dict(
        roles=("sglang_patches:main",),
        engine_fields=("image", "sglang_version", "patches", "min_new_tokens"),
        live="image",
        across=True,
    ),
    "launch": dict(
        roles=("sglang_node:main",),
        published={"roce_node": "roce", "sglang_patches_node": "patches"},
    ),
    # The cluster description names the head's engine container, nothing else of the profile.
    "control": dict(roles=("watchdog:control",), engine_fields=("container_name",), across=True),
    "watchdog": dict(roles=("watchdog:main",), engine_fields=("container_name",)),
}

ARGUMENT_SPEC = dict(
    stage=dict(type="str", required=True, choices=[*STAGES, "all"]),
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
        if stage == "all":
            return self._all(result, task_vars, probe, skip)
        facts = {
            name: dict(self._value(task_vars, name, None) or {})
            for name in ("converge_digests", "converge_reasons", "converge_run")
        }
        if args["across"]:
            differs = self._any_node_differs(task_vars, stage)
        else:
            differs = False
            # A play without the probe (the canary rendering its candidates) enters the stage.
            if probe is not None:
                digest, reasons = self._decide(task_vars, probe, stage)
                facts["converge_digests"][stage] = digest
                facts["converge_reasons"][stage] = reasons + list(args["live"])
                differs = bool(facts["converge_reasons"][stage])
        facts["converge_run"][stage] = (not skip) or probe is None or differs
        # The values include secrets (the token, the API key): only their digest is returned.
        result.update(changed=False, ansible_facts=facts)
        return result

    def _decide(self, task_vars, probe, stage, published=None):
        """The stage's digest and why it must run on this node ([] when it need not).

        ``published``: what earlier stages publish when they are not entered (their recorded
        outputs), for a decision taken before they ran."""
        table = STAGES[stage]
        values = self._values(task_vars, table["roles"], table.get("engine_fields"))
        for name in table.get("published", {}) if published is not None else ():
            values[name] = published.get(name, UNDEFINED)
        digest = converge_digest(values, list(table["roles"]))
        stamp = "{}/{}.json".format(self._value(task_vars, "converge_dir", None), stage)
        reasons = converge_reasons(probe, stamp, stage, digest)
        if table.get("live"):
            reasons += converge_live(probe, table["live"], self._live_want(task_vars, stage))
        return digest, reasons

    def _live_want(self, task_vars, stage):
        """What a stage's live check compares the probe with (its inputs and its record)."""
        recorded = self._value(task_vars, "converge_recorded", None) or {}
        if stage == "roce":
            functions = roce_functions(
                self._value(task_vars, "roce_hcas", None) or [],
                *(self._value(task_vars, v, "") for v in ("roce_hca", "roce_iface", "roce_ipv4")),
                self._value(task_vars, "roce_subnet", ""),
            )
            return {
                "mtu": int(self._value(task_vars, "roce_mtu", 0)),
                "functions": [
                    {
                        "iface": fn["iface"],
                        "address": "{}/{}".format(
                            fn["ipv4"], str(fn["subnet"]).rsplit("/", maxsplit=1)[-1]
                        ),
                    }
                    for fn in functions
                ],
                "recorded": (recorded.get("roce") or {}).get("roce_node"),
            }
        if stage == "patches":
            engine = self._value(task_vars, "sglang_engine", None) or {}
            node = (recorded.get("patches") or {}).get("sglang_patches_node") or {}
            return {"image": engine.get("image"), "image_id": node.get("image_id") or ""}
        return {}

    def _all(self, result, task_vars, probe, skip):
        """Every stage at once, before any ran: is there nothing to do on this node?

        Each later stage's inputs that an earlier one publishes are taken as recorded (what a
        stage that is not entered publishes); a rank must run the configuration its launch
        recorded, and no restart may be asked for. ``converge_quiet`` is the answer; a node
        that is not quiet goes through the stages one by one, which decide again."""
        reasons = {}
        if not skip or probe is None:
            reasons["all"] = ["converge_skip is off" if not skip else "no probe in this play"]
        else:
            recorded = self._value(task_vars, "converge_recorded", None) or {}
            published = {}
            for table in STAGES.values():
                for name, origin in table.get("published", {}).items():
                    published[name] = (recorded.get(origin) or {}).get(name, UNDEFINED)
            for stage, table in STAGES.items():
                enabled = table.get("enabled")
                if enabled and not boolean(self._value(task_vars, enabled, True), strict=False):
                    continue
                _digest, why = self._decide(task_vars, probe, stage, published)
                if why:
                    reasons[stage] = why
            engine = self._value(task_vars, "sglang_engine", None) or {}
            rank = rank_container(
                engine.get("container_name"), self._value(task_vars, "spark_rank", 0)
            )
            why = converge_live(
                probe,
                "rank",
                {
                    "container": rank,
                    "config_hash": (recorded.get("launch") or {}).get("sglang_node_config_hash"),
                },
            )
            if boolean(self._value(task_vars, "sglang_node_force_restart", False), strict=False):
                why.append("sglang_node_force_restart is on")
            if why:
                reasons["bringup"] = why
        result.update(
            changed=False,
            ansible_facts={"converge_quiet": not reasons},
            reasons=reasons,
            msg="nothing differs on this node"
            if not reasons
            else "differs: " + "; ".join(f"{k}: {', '.join(v)}" for k, v in reasons.items()),
        )
        return result

    def _value(self, task_vars, name, default):
        if name not in task_vars:
            return default
        return plain(self._templar.template(task_vars[name]))

    def _values(self, task_vars, roles, engine_fields):
        """What lookup('vars', *names) gives for the options the stage's roles declare."""
        names = converge_inputs(list(roles))
        values = {name: self._value(task_vars, name, UNDEFINED) for name in names}
        cluster = self._value(task_vars, "preflight_cluster", None)
        if cluster is None:
            raise AnsibleActionFail(
                "converge_decide: preflight_cluster is not set (role preflight)"
            )
        nodes = cluster.get("nodes", cluster) if isinstance(cluster, Mapping) else cluster
        values["preflight_cluster"] = converge_cluster_view(nodes, names)
        if engine_fields is not None and "sglang_engine" in names:
            engine = values["sglang_engine"] if isinstance(values["sglang_engine"], Mapping) else {}
            values["sglang_engine"] = {k: v for k, v in engine.items() if k in set(engine_fields)}
        return values

    def _any_node_differs(self, task_vars, stage):
        hostvars = task_vars.get("hostvars", {})
        for host in task_vars.get("ansible_play_hosts") or []:
            reasons = (hostvars[host].get("converge_reasons") or {}).get(stage)
            if reasons:
                return True
        return False
