# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Controller-side glue for sparkfleet.serving.cluster_info (no host is contacted)."""

from __future__ import annotations

import os

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.sparkfleet.serving.plugins.plugin_utils._inventory import (
    bring_up_order,
    check_cluster,
    cluster_summary,
)
from ansible_collections.sparkfleet.serving.plugins.plugin_utils._inventory_read import (
    no_nodes_error,
    read_declared_variables,
    unknown_variables,
)
from ansible_collections.sparkfleet.serving.plugins.plugin_utils._inventory_run import (
    PLAYBOOK_VARS,
    run_problems,
)
from ansible_collections.sparkfleet.serving.plugins.plugin_utils._inventory_vars import (
    CLUSTER_VARS,
    URL_VARS,
)

display = Display()

# One home for the variable list: the checks' table (documented by the role
# sparkfleet.serving.cluster, whose defaults every play that runs this has in scope).
NODE_VARS = tuple(CLUSTER_VARS)
_NONE = object()

# Files of an inventory folder Ansible parses as sources (not its group_vars/host_vars).
SOURCE_SUFFIXES = (".yml", ".yaml", ".json")


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset(
        (
            "group",
            "engine",
            "api_key_set",
            "hf_token_set",
            "weights",
            "playbook",
            "defaults",
            "fail_on_error",
            "nodes_only",
        )
    )

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
        if not hosts or args.get("nodes_only"):
            return self._nodes_only(result, group, hosts, task_vars)

        nodes = [self._node(host, hostvars, defaults, task_vars) for host in hosts]

        errors, warnings, ranks = check_cluster(
            nodes,
            args.get("engine") or {},
            bool(args.get("api_key_set")),
            weights=bool(args.get("weights", True)),
            hf_token_set=bool(args.get("hf_token_set")),
        )
        playbook = args.get("playbook")
        if playbook:
            errors += run_problems(
                playbook,
                self._run_vars(PLAYBOOK_VARS.get(playbook, ()), task_vars),
                nodes[0].get("cluster_name"),
            )
        # The inventory's own check (not the canary's candidate profiles); without the roles'
        # specs (a partial copy of the collection) nothing could be judged.
        declared = {} if defaults else read_declared_variables()
        if declared:
            errors += unknown_variables(
                {host: self._inventory_names(hostvars, host) for host in hosts}, declared
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
            summary=cluster_summary(
                nodes,
                ranks,
                args.get("engine") or {},
                playbook or "site",
                bool(args.get("hf_token_set")),
                warnings,
                weights=bool(args.get("weights", True)),
            ),
        )
        if errors and args.get("fail_on_error", True):
            # The message says it all: a failed run prints its result, and every node's
            # variables would bury the message under a dump of about 40 lines per node.
            del result["nodes"], result["summary"]
            result["failed"] = True
            result["msg"] = (
                f"inventory of {len(hosts)} node(s) has {len(errors)} problem(s):\n"
                + "\n".join(f"  - {e}" for e in errors)
            )
        return result

    def _node(self, host, hostvars, defaults, task_vars):
        """One host's values of the variables the checks read (NODE_VARS, then URL_VARS)."""
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
        for var in URL_VARS:  # checked only where the inventory sets it
            if var in host_vars:
                try:
                    node[var] = host_vars[var]
                except Exception as exc:
                    raise AnsibleActionFail(f"{host}: {var} cannot be evaluated: {exc}") from exc
        return node

    def _run_vars(self, names, task_vars):
        """The run variables (extra vars, inventory) a playbook's offline checks read, templated."""
        found = {}
        for name in names:
            if name in task_vars:
                try:
                    found[name] = self._templar.template(task_vars[name])
                except Exception as exc:  # a value that does not template
                    raise AnsibleActionFail(f"cluster: {name} cannot be evaluated: {exc}") from exc
        return found

    def _nodes_only(self, result, group, hosts, task_vars):
        """Whether ``group`` has hosts; if not, how the inventory was read and what it holds."""
        result.update(
            changed=False, errors=[], warnings_found=[], nodes=[{"host": h} for h in hosts]
        )
        sources = [str(s) for s in task_vars.get("ansible_inventory_sources") or []]
        if hosts:
            # Ansible reads the vaulted variables of the nodes only when a play on them starts,
            # and then fails with "Decryption failed" and no file named: say which, and how.
            unreadable = self._unreadable_vaults(sources)
            if unreadable:
                result.update(
                    failed=True,
                    errors=unreadable,
                    msg="inventory has vaulted files this run cannot decrypt:\n"
                    + "\n".join(f"  - {e}" for e in unreadable),
                )
            return result
        groups = {name: list(members) for name, members in task_vars.get("groups", {}).items()}
        error = no_nodes_error(group, sources, groups, self._unparsed(sources))
        del result["nodes"], result["warnings_found"]
        result.update(failed=True, errors=[error], msg=f"inventory has no cluster:\n  - {error}")
        return result

    def _unreadable_vaults(self, sources):
        """One line per vaulted file of the inventory's group_vars/host_vars that will not open."""
        secrets = getattr(getattr(self._loader, "_vault", None), "secrets", None)
        flag = (
            "the password given does not open it: pass that file's password "
            "(--ask-vault-pass, --vault-password-file <file>, or --vault-id <id>@<file> per id)"
            if secrets
            else "no vault password was given: add --ask-vault-pass or --vault-password-file <file>"
        )
        found = []
        for path in self._var_files(sources):
            try:
                with open(path, "rb") as fh:
                    head = fh.read(64)
                    vaulted = head.startswith(b"$ANSIBLE_VAULT") or b"!vault" in head + fh.read()
            except OSError:
                continue
            if not vaulted:
                continue
            try:
                self._decrypt_all(self._loader.load_from_file(path, cache="none"))
            except Exception as exc:  # AnsibleVaultError and kin: the file will not open
                if "vault" not in f"{type(exc).__name__} {exc}".lower() and "decrypt" not in str(
                    exc
                ):
                    continue  # another problem, reported by Ansible in its own words
                found.append(f"cluster: {path} is vaulted and {flag}")
        return found

    @staticmethod
    def _var_files(sources):
        """Files under the group_vars/ and host_vars/ Ansible reads beside each source."""
        dirs = []
        for source in sources:
            base = source if os.path.isdir(source) else os.path.dirname(source)
            dirs += [os.path.join(base, d) for d in ("group_vars", "host_vars")]
        for top in dirs:
            for root, subdirs, files in os.walk(top):
                subdirs[:] = sorted(d for d in subdirs if d[0] != ".")
                for name in sorted(files):
                    if name[0] != "." and not name.endswith((".swp", "~")):
                        yield os.path.join(root, name)

    @classmethod
    def _decrypt_all(cls, data):
        """Open every vaulted value of ``data`` (a vaulted file is opened by loading it)."""
        if isinstance(data, dict):
            for value in data.values():
                cls._decrypt_all(value)
        elif isinstance(data, list):
            for value in data:
                cls._decrypt_all(value)
        else:
            str(data)

    def _unparsed(self, sources):
        """(path, reason) of each YAML/JSON source file that does not parse.

        Ansible only warns about such a file and goes on without its hosts.
        """
        found = []
        for source in sources:
            if os.path.isdir(source):
                paths = []
                for root, dirs, files in os.walk(source):
                    dirs[:] = sorted(
                        d for d in dirs if d not in ("group_vars", "host_vars") and d[0] != "."
                    )
                    paths += [os.path.join(root, f) for f in sorted(files)]
            else:
                paths = [source]
            for path in paths:
                if not path.endswith(SOURCE_SUFFIXES) or not os.path.isfile(path):
                    continue
                try:
                    self._loader.load_from_file(path, cache="none")
                except Exception as exc:  # the parser's own words, with line and column
                    text = str(exc).strip()
                    reason = text.splitlines()[0].rstrip(".") if text else type(exc).__name__
                    origin = getattr(exc, "obj", None)  # where the parser stopped
                    line = getattr(origin, "line_num", None)
                    if line:
                        reason += f" at line {line}, column {getattr(origin, 'col_num', '?')}"
                    found.append((path, reason))
        return found

    @staticmethod
    def _inventory_names(hostvars, host):
        """Names of the variables the inventory and extra vars give ``host``.

        Facts this run set (set_fact, register) are not inventory variables: a playbook may
        import another after a first one set them.
        """
        names = set(hostvars.raw_get(host))
        manager = getattr(hostvars, "_variable_manager", None)
        for cache in ("_nonpersistent_fact_cache", "_fact_cache"):
            try:
                names -= set(getattr(manager, cache, {}).get(host) or {})
            except Exception:  # a fact cache plugin that cannot answer: keep the names
                continue
        return names

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
