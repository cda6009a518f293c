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

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
SPECS = os.path.join(ROOT, "roles", "sglang", "meta", "argument_specs.yml")
ENTRY = "profile"


def load_schema():
    """plugins/module_utils/_profile_schema.py (it imports nothing of the collection)."""
    path = os.path.join(ROOT, "plugins", "module_utils", "_profile_schema.py")
    spec = importlib.util.spec_from_file_location("_profile_schema", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _writer():
    """tools/register.py, the one writer of argument specs (loaded by path, as the tests do)."""
    spec = importlib.util.spec_from_file_location(
        "register_tool", os.path.join(ROOT, "tools", "register.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def entry_point_lines(schema):
    """The ``  profile:`` block of argument_specs.yml (two-space indented under argument_specs)."""
    write = _writer()
    entry = schema.ENTRY_POINT
    lines = [f"  {ENTRY}:"]
    lines += write.text_lines("short_description: ", entry["short_description"], 4)
    lines += write.description_lines(entry["description"], 4)
    lines.append(f"    author: {write.scalar(entry['author'])}")
    lines.append("    options:")
    for name, spec in schema.argument_spec().items():
        lines += write.option_lines(name, spec, 6, flow=True)
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
