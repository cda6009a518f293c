#!/usr/bin/env python3
# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Write the ``profile`` entry point of roles/sglang/meta/argument_specs.yml from the profile
schema (plugins/module_utils/_profile_schema.py); every other entry point stays as it is.

    python tools/profile_spec.py            # rewrite the file (make profile-spec)
    python tools/profile_spec.py --check    # exit 1 when the file differs from the schema
"""

from __future__ import annotations

import importlib.util
import os
import sys
import textwrap

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
SPECS = os.path.join(ROOT, "roles", "sglang", "meta", "argument_specs.yml")
ENTRY = "profile"
WIDTH = 110  # longest line before a description wraps (yamllint allows 120 columns)


def load_schema():
    """plugins/module_utils/_profile_schema.py (it imports nothing of the collection)."""
    path = os.path.join(ROOT, "plugins", "module_utils", "_profile_schema.py")
    spec = importlib.util.spec_from_file_location("_profile_schema", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _scalar(value):
    text = yaml.safe_dump(value, default_flow_style=True, width=10**6).strip()
    return text[: -len("...")].strip() if text.endswith("...") else text


def _text(key, value, indent):
    """``key: value`` for a string, wrapped as a plain multi-line scalar when it is long."""
    pad = " " * indent
    line = f"{pad}{key}{_scalar(value)}"
    if len(line) <= WIDTH or _scalar(value) != value:
        return [line]
    width = WIDTH - indent - len(key)
    wrapped = textwrap.wrap(value, width, break_long_words=False, break_on_hyphens=False)
    return [f"{pad}{key}{wrapped[0]}"] + [f"{pad}  {part}" for part in wrapped[1:]]


def _description(value, indent):
    pad = " " * indent
    if isinstance(value, str):
        return _text("description: ", value, indent)
    lines = [f"{pad}description:"]
    for item in value:
        lines += _text("- ", item, indent + 2)
    return lines


def _option(name, spec, indent):
    pad = " " * indent
    lines = [f"{pad}{name}:"]
    lines += _description(spec["description"], indent + 2)
    for key in ("type", "elements", "choices", "default", "required"):
        if key in spec:
            lines.append(f"{pad}  {key}: {_scalar(spec[key])}")
    if spec.get("options"):
        lines.append(f"{pad}  options:")
        for child, child_spec in spec["options"].items():
            lines += _option(child, child_spec, indent + 4)
    return lines


def entry_point_lines(schema):
    """The ``  profile:`` block of argument_specs.yml (two-space indented under argument_specs)."""
    entry = schema.ENTRY_POINT
    lines = [f"  {ENTRY}:"]
    lines += _text("short_description: ", entry["short_description"], 4)
    lines += _description(entry["description"], 4)
    lines.append(f"    author: {_scalar(entry['author'])}")
    lines.append("    options:")
    for name, spec in schema.argument_spec().items():
        lines += _option(name, spec, 6)
    return lines


def render(text, schema):
    """``text`` (argument_specs.yml) with its profile entry point replaced by the schema's."""
    lines = text.splitlines()
    start = lines.index(f"  {ENTRY}:")
    end = start + 1
    while end < len(lines) and not (lines[end][:2] == "  " and lines[end][2:3].isalnum()):
        end += 1
    out = "\n".join(lines[:start] + entry_point_lines(schema) + lines[end:]) + "\n"
    options = yaml.safe_load(out)["argument_specs"][ENTRY]["options"]
    if options != schema.argument_spec():
        raise SystemExit("profile_spec: the written spec does not read back as the schema")
    return out


def main(argv):
    with open(SPECS, encoding="utf-8") as handle:
        text = handle.read()
    wanted = render(text, load_schema())
    if "--check" in argv:
        if wanted != text:
            print(f"{SPECS} differs from the profile schema; run make profile-spec")
            return 1
        return 0
    if wanted != text:
        with open(SPECS, "w", encoding="utf-8") as handle:
            handle.write(wanted)
        print(f"wrote the {ENTRY} entry point of {SPECS}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
