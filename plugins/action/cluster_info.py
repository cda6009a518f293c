# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Controller-side glue for sparkfleet.serving.cluster_info (no host is contacted)."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.sparkfleet.serving.plugins.module_utils._inventory import (
    CLUSTER_VARS,
    bring_up_order,
    check_cluster,
)

display = Display()

# One home for the variable list: the checks' table (documented by the role
# sparkfleet.serving.cluster, whose defaults every play that runs this has in scope).
NODE_VARS = tuple(CLUSTER_VARS)
_NONE = object()


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset(("group", "engine", "api_key_set", "defaults", "fail_on_error"))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = self._task.args
        unknown = set(args) - self._VALID_ARGS
        if unknown:
            raise AnsibleActionFail(f"unsupported parameters: {', '.join(sorted(unknown))}")
        group = args.get("group", "spark_nodes")
        defaults = args.get("defaults") or {}
        hosts = list(task_vars.get("groups", {}).get(group, []))
        hostvars = task_vars.get("hostvars", {})

        nodes = []
        for host in hosts:
            node = {"host": host}
            host_vars = hostvars[host]
            templar = []  # made once per host, only when a default must be evaluated
            for var in NODE_VARS:
                try:
                    node[var] = self._value(host, hostvars, var, defaults, task_vars, templar)
                except Exception as exc:  # an inventory value that does not template
                    raise AnsibleActionFail(f"{host}: {var} cannot be evaluated: {exc}") from exc
            if node["ansible_host"] in (None, host) and "ansible_host" not in host_vars:
                node["ansible_host"] = None
            nodes.append(node)

        errors, warnings, ranks = check_cluster(
            nodes, args.get("engine") or {}, bool(args.get("api_key_set"))
        )
        for warning in warnings:
            display.warning(warning)
        order = bring_up_order(ranks)
        result.update(
            changed=False,
            errors=errors,
            warnings_found=warnings,
            ranks=ranks,
            head=order[-1] if order else None,
            bring_up_order=order,
            nodes=nodes,
        )
        if errors and args.get("fail_on_error", True):
            # The message says it all: a failed run prints its result, and every node's
            # variables would bury the message under a dump of about 40 lines per node.
            del result["nodes"]
            result["failed"] = True
            result["msg"] = (
                f"inventory of {len(hosts)} node(s) has {len(errors)} problem(s):\n"
                + "\n".join(f"  - {e}" for e in errors)
            )
        return result

    def _value(self, host, hostvars, var, defaults, task_vars, templar):
        """``var`` as ``host`` sees it: its own value, else the given or the play's default.

        ``hostvars`` holds inventory variables, extra vars and facts but no role defaults, so
        a variable the inventory leaves out takes the default the play has in scope (the role
        sparkfleet.serving.cluster), templated with that host's variables: a default such
        as ``{{ spark_mgmt_iface }}`` means each node's own NIC, not the running host's.
        """
        host_vars = hostvars[host]
        if var in host_vars:
            return host_vars[var]
        if var in defaults:
            return defaults[var]
        raw = self._play_default(var, hostvars, task_vars)
        if raw is _NONE:
            return None
        if not templar:
            context = dict(hostvars.raw_get(host))
            templar.append(self._templar.copy_with_new_env(available_variables=context))
        return templar[0].template(raw)

    def _play_default(self, var, hostvars, task_vars):
        """The raw value of ``var`` the play gives a host that does not set it."""
        running = task_vars.get("inventory_hostname")
        # task_vars are the running host's: when its inventory sets var, that value is its
        # own, not a default, so take the default from the roles in scope instead.
        if var in task_vars and (running is None or var not in hostvars[running]):
            return task_vars[var]
        role = getattr(self._task, "_role", None)
        role_defaults = role.get_default_vars() if role is not None else {}
        return role_defaults.get(var, _NONE)
