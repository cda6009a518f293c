# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Controller-side glue for sparkfleet.serving.cluster_info (no host is contacted)."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.sparkfleet.serving.plugins.module_utils._inventory import (
    bring_up_order,
    check_cluster,
)

display = Display()

NODE_VARS = (
    "spark_rank",
    "ansible_host",
    "roce_ipv4",
    "spark_mgmt_iface",
    "spark_mgmt_subnet",
    "roce_iface",
    "roce_hca",
    "roce_subnet",
    "roce_mtu",
    "roce_gid_mode",
    "roce_sysfs_root",
    "sglang_nccl_socket_ifname",
    "sglang_profile",
    "sglang_profile_overrides",
)
_MISSING = object()


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
            for var in NODE_VARS:
                value = _MISSING
                try:
                    if var in host_vars:
                        value = host_vars[var]
                except Exception as exc:  # an inventory value that does not template
                    raise AnsibleActionFail(f"{host}: {var} cannot be evaluated: {exc}") from exc
                node[var] = defaults.get(var) if value is _MISSING else value
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
            result["failed"] = True
            result["msg"] = (
                f"inventory of {len(hosts)} node(s) has {len(errors)} problem(s):\n"
                + "\n".join(f"  - {e}" for e in errors)
            )
        return result
