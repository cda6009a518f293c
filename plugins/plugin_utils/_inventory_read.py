# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What Ansible read of the inventory: variables no role declares, a group with no host."""

from __future__ import annotations

import os

from ansible_collections.sparkfleet.serving.plugins.plugin_utils import _register
from ansible_collections.sparkfleet.serving.plugins.plugin_utils._inventory_report import Report
from ansible_collections.sparkfleet.serving.plugins.plugin_utils._inventory_vars import PREFIXES
from ansible_collections.sparkfleet.serving.plugins.plugin_utils._profile import nearest


def read_declared_variables(root=_register.COLLECTION):
    """Variable name -> the roles that read it, from the register (meta/variables.yml); {}
    in a partial copy of the collection without it (nothing can be judged then)."""
    if not os.path.isfile(os.path.join(root, _register.PATH)):
        return {}
    return _register.declared(root)


def unknown_variables(names_by_host, declared):
    """One line per variable with a collection prefix that no role declares.

    ``names_by_host``: host -> the variable names its inventory (and extra vars) set.
    Hosts that set the same unknown variable are named together.
    """
    hosts_of = {}
    for host, names in names_by_host.items():
        for name in names:
            if str(name).startswith(PREFIXES) and name not in declared:
                hosts_of.setdefault(name, []).append(host)
    report = Report()
    for name in sorted(hosts_of):
        near = nearest(name, [d for d in declared if d.startswith(PREFIXES)])
        hint = f" (did you mean {near}?)" if near else ""
        fix = (
            f"rename it to {near}"
            if near
            else "correct or remove it; each role's variables: "
            "ansible-doc -t role sparkfleet.serving.<role>"
        )
        report.error(
            ", ".join(hosts_of[name]),
            name,
            f"is not a variable of any role of sparkfleet.serving{hint}, so nothing reads it",
            fix,
        )
    return report.errors


def no_nodes_error(group, sources, groups, unparsed=()):
    """The refusal of an inventory whose ``group`` has no host, with how it was read.

    ``sources``: the inventory sources given (ansible_inventory_sources); ``groups``: group
    -> hosts as Ansible read them; ``unparsed``: (path, reason) of source files that do not
    parse (Ansible only warns about them and goes on with what it could read).
    """

    def shown(source):
        source = str(source)
        if os.path.exists(source) or "," in source:
            return source
        return f"{source} (which does not exist)"

    read = ", ".join(shown(s) for s in sources) or "no source"
    found = [
        f"{name} ({', '.join(hosts)})" if hosts else f"{name} (empty)"
        for name, hosts in sorted(groups.items())
        if name not in ("all", "ungrouped") and name != group
    ]
    if groups.get("ungrouped"):
        found.append(f"hosts in no group ({', '.join(groups['ungrouped'])})")
    problem = f"has no hosts in the inventory read from {read}"
    problem += f"; groups found: {'; '.join(found)}" if found else "; it has no hosts at all"
    if unparsed:
        problem += "; Ansible could not parse " + "; ".join(f"{p}: {why}" for p, why in unparsed)
        fix = (
            f"correct {', '.join(path for path, _why in unparsed)} (ansible-inventory -i "
            f"{sources[0] if sources else '<inventory>'} --graph shows what Ansible reads)"
        )
    elif any(not os.path.exists(str(s)) and "," not in str(s) for s in sources) or not sources:
        fix = f"name the cluster's folder: -i inventory/<cluster> (its hosts.yml lists {group})"
    else:
        near = nearest(group, [n for n in groups if n not in ("all", "ungrouped", group)])
        fix = (
            f"rename the group {near} to {group}"
            if near
            else f"list the Sparks under {group}: hosts: in hosts.yml"
        )
    return f"cluster: {group} {problem}; fix: {fix}"
