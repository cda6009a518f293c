# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The register of the collection's variables (meta/variables.yml), read once per process.

Every variable a role reads is declared there once: its owner (the role entry point whose
argument spec validates and documents it, and whose defaults/main.yml gives its value),
its scope (``host``, ``node`` and ``cluster`` for the cluster variables the inventory
checks read, ``role`` for a role's own), whether it is a fact its owner sets, the other
stages that read it (``read_by``) and its argument spec. tools/register.py writes each
role's meta/argument_specs.yml and defaults/main.yml from it; the converge stages' inputs
and the inventory checks' cluster variables are read from it here. It imports nothing of
the collection (the tools load it by its path).
"""

from __future__ import annotations

import functools
import os

import yaml

# plugins/plugin_utils/_register.py -> the collection's root.
COLLECTION = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PATH = os.path.join("meta", "variables.yml")
# The register's own keys of a variable; every other key is its argument spec.
OWN_KEYS = ("role", "scope", "fact", "read_by", "value", "in_defaults")
SCOPES = ("host", "node", "cluster", "role")
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class RegisterError(ValueError):
    """A register that does not describe its variables (names the variable and the fix)."""


@functools.lru_cache(maxsize=None)
def load(root=COLLECTION):
    """``{"roles": {role: {entry: header}}, "variables": {name: record}}``, checked."""
    with open(os.path.join(root, PATH), encoding="utf-8") as handle:
        data = yaml.load(handle, Loader=_LOADER) or {}
    roles = data.get("roles") or {}
    variables = data.get("variables") or {}
    for name, record in variables.items():
        role, entry = owner(record)
        if entry not in roles.get(role, {}):
            raise RegisterError(
                f"{PATH}: variable {name} belongs to {role}:{entry}, which is no entry point "
                "of the register's roles; add the entry point under roles: or fix role:"
            )
        if record.get("scope") not in SCOPES:
            raise RegisterError(
                f"{PATH}: variable {name} has scope {record.get('scope')!r}, one of {SCOPES}"
            )
        for reader in record.get("read_by") or ():
            r_role, r_entry = split(reader)
            if r_entry not in roles.get(r_role, {}):
                raise RegisterError(
                    f"{PATH}: variable {name} is read by {reader}, no entry point of a role"
                )
    return {"roles": roles, "variables": variables}


def split(item):
    """``role`` or ``role:entry`` -> (role, entry); the entry defaults to main."""
    role, _sep, entry = str(item).partition(":")
    return role, entry or "main"


def owner(record):
    return split(record.get("role") or "")


def spec(record):
    """A variable's argument spec (its record without the register's own keys)."""
    return {key: value for key, value in record.items() if key not in OWN_KEYS}


def options(role, entry, root=COLLECTION):
    """The options of one entry point's argument spec: the variables it owns, in order."""
    return {
        name: spec(record)
        for name, record in load(root)["variables"].items()
        if owner(record) == (role, entry)
    }


def readers(record):
    """Every role entry point that reads a variable: its ``read_by`` and its owner, unless
    the variable is a fact the owner sets (``fact: true``) and does not read."""
    own = [] if record.get("fact") else [owner(record)]
    return own + [split(item) for item in record.get("read_by") or ()]


@functools.lru_cache(maxsize=None)
def stage_inputs(item, root=COLLECTION):
    """The variables a stage reads: ``role`` (every entry point) or ``role:entry``."""
    role, _sep, entry = str(item).partition(":")
    names = []
    for name, record in load(root)["variables"].items():
        if any(r == role and (not entry or e == entry) for r, e in readers(record)):
            names.append(name)
    return tuple(sorted(names))


def cluster_vars(root=COLLECTION):
    """The cluster variables and their scope (host, node, cluster), in the register's order."""
    return {
        name: record["scope"]
        for name, record in load(root)["variables"].items()
        if record["scope"] != "role"
    }


def declared(root=COLLECTION):
    """Variable name -> the roles that read it (its owner first)."""
    out = {}
    for name, record in load(root)["variables"].items():
        roles = []
        for role, _entry in [owner(record), *readers(record)]:
            if role not in roles:
                roles.append(role)
        out[name] = roles
    return out
