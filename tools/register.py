#!/usr/bin/env python3
# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Write every role's meta/argument_specs.yml and defaults/main.yml from the register of
variables (meta/variables.yml, read by plugins/plugin_utils/_register.py).

    python tools/register.py            # rewrite the files (make role-docs)
    python tools/register.py --check    # exit 1 naming every file that differs

The sglang role's ``profile`` entry point (the profile's fields, not variables) is written
from the profile schema by tools/profile_spec.py, which this calls.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import textwrap

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
WIDTH = 110  # longest line before a description wraps (yamllint allows 120 columns)
SPEC_KEYS = ("type", "elements", "choices", "default", "required", "no_log")
GENERATED = (
    "# Generated from meta/variables.yml by `make role-docs` (tools/register.py): "
    "edit the register."
)


def _module(name, *parts):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, *parts))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


register = _module("_register", "plugins", "plugin_utils", "_register.py")


def scalar(value):
    text = yaml.safe_dump(value, default_flow_style=True, width=10**6).strip()
    return text[: -len("...")].strip() if text.endswith("...") else text


def text_lines(key, value, indent):
    """``key: value`` for a string, wrapped as a plain multi-line scalar when it is long."""
    pad = " " * indent
    line = f"{pad}{key}{scalar(value)}"
    if len(line) <= WIDTH or not isinstance(value, str):
        return [line]
    wrapped = textwrap.wrap(
        value, WIDTH - indent - len(key), break_long_words=False, break_on_hyphens=False
    )
    if scalar(value) == value and " ".join(wrapped) == value:
        return [f"{pad}{key}{wrapped[0]}"] + [f"{pad}  {part}" for part in wrapped[1:]]
    # A string YAML would quote (a colon, a quote mark): a folded block, which needs none.
    wrapped = textwrap.wrap(
        value, WIDTH - indent - 2, break_long_words=False, break_on_hyphens=False
    )
    if " ".join(wrapped) != value or "\n" in value:
        return [line]
    return [f"{pad}{key}>-"] + [f"{pad}  {part}" for part in wrapped]


def description_lines(value, indent, key="description"):
    pad = " " * indent
    if isinstance(value, str):
        return text_lines(f"{key}: ", value, indent)
    lines = [f"{pad}{key}:"]
    for item in value:
        lines += text_lines("- ", item, indent + 2)
    return lines


def value_lines(key, value, indent):
    """``key: value``; a non-empty mapping or list as an indented block."""
    pad = " " * indent
    if isinstance(value, (dict, list)) and value:
        block = yaml.safe_dump(value, default_flow_style=False, sort_keys=False, width=WIDTH)
        return [f"{pad}{key}:"] + [f"{pad}  {line}" for line in block.splitlines()]
    return [f"{pad}{key}: {scalar(value)}"]


def option_lines(name, spec, indent, own=(), flow=False):
    """One option of an argument spec; ``own`` are the register's keys, written first.

    ``flow`` writes every value on its key's line (the profile entry point's style)."""
    pad = " " * indent
    lines = [f"{pad}{name}:"]
    for key in own:
        if key in spec:
            lines += value_lines(key, spec[key], indent + 2)
    lines += description_lines(spec["description"], indent + 2)
    for key in SPEC_KEYS:
        if key in spec:
            if flow:
                lines.append(f"{pad}  {key}: {scalar(spec[key])}")
            else:
                lines += value_lines(key, spec[key], indent + 2)
    if spec.get("options"):
        lines.append(f"{pad}  options:")
        for child, child_spec in spec["options"].items():
            lines += option_lines(child, child_spec, indent + 4, flow=flow)
    return lines


OPTION = re.compile(r"O\(([a-z_][a-z0-9_]*)((?:=[^)]*)?)\)")


def qualify(text, role, entry, root=ROOT):
    """``O(name)`` of a variable another entry point declares, as a reference to that one.

    The register's texts name any variable as O(name); the docs linters (and ansible-doc)
    read a bare O() as an option of the same entry point."""
    if isinstance(text, list):
        return [qualify(item, role, entry, root) for item in text]
    own = register.options(role, entry, root)
    variables = register.load(root)["variables"]

    def one(match):
        name, value = match.group(1), match.group(2)
        if name in own or name not in variables:
            return match.group(0)
        o_role, o_entry = register.owner(variables[name])
        return f"O(sparkfleet.serving.{o_role}#role:{o_entry}:{name}{value})"

    return OPTION.sub(one, text)


def header_lines(header, indent, role=None, entry=None):
    pad = " " * indent
    lines = text_lines("short_description: ", header["short_description"], indent)
    description = header["description"]
    if role is not None:
        description = qualify(description, role, entry)
    lines += description_lines(description, indent)
    if "author" in header:
        lines.append(f"{pad}author: {scalar(header['author'])}")
    if header.get("examples"):
        lines.append(f"{pad}examples: |")
        lines += [
            f"{pad}  {line}".rstrip() for line in header["examples"].rstrip("\n").splitlines()
        ]
    return lines


def specs_text(role, root=ROOT):
    """roles/<role>/meta/argument_specs.yml."""
    data = register.load(root)
    lines = ["---", GENERATED, "argument_specs:"]
    for entry, header in data["roles"][role].items():
        lines.append(f"  {entry}:")
        if (role, entry) == ("sglang", "profile"):
            continue  # written below from the profile schema
        lines += header_lines(header, 4, role, entry)
        options = register.options(role, entry, root)
        if options:
            lines.append("    options:")
            for name, spec in options.items():
                spec = {**spec, "description": qualify(spec["description"], role, entry, root)}
                lines += option_lines(name, spec, 6)
    text = "\n".join(lines) + "\n"
    if "profile" in data["roles"][role]:
        profile_spec = _module("profile_spec", "tools", "profile_spec.py")
        text = profile_spec.render(text, profile_spec.load_schema())
    return text


def defaults_text(role, root=ROOT):
    """roles/<role>/defaults/main.yml: the value of every variable the role owns."""
    lines = ["---", GENERATED]
    for name, record in register.load(root)["variables"].items():
        if register.owner(record)[0] != role or not record.get("in_defaults", True):
            continue
        if "value" not in record and "default" not in record:
            continue
        value = record.get("value", record.get("default"))
        # The cluster role's variables keep the prefix of the stage that reads them.
        noqa = "" if name.startswith(f"{role}_") else "  # noqa: var-naming[no-role-prefix]"
        out = value_lines(name, value, 0)
        out[0] += noqa
        lines += out
    return "\n".join(lines) + "\n"


def files(root=ROOT):
    """(path, wanted text) of every generated file."""
    for role in register.load(root)["roles"]:
        base = os.path.join(root, "roles", role)
        yield os.path.join(base, "meta", "argument_specs.yml"), specs_text(role, root)
        yield os.path.join(base, "defaults", "main.yml"), defaults_text(role, root)


def stale(root=ROOT):
    out = []
    for path, wanted in files(root):
        old = None
        if os.path.exists(path):
            with open(path, encoding="utf-8") as handle:
                old = handle.read()
        if old != wanted:
            out.append((path, wanted))
    return out


def main(argv):
    changed = stale()
    if "--check" in argv:
        for path, _wanted in changed:
            name = os.path.relpath(path, ROOT)
            print(f"register: {name} differs from meta/variables.yml: run make role-docs")
        return 1 if changed else 0
    for path, wanted in changed:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(wanted)
        print(f"register: wrote {os.path.relpath(path, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
