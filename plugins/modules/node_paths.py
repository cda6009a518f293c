#!/usr/bin/python
# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: node_paths
short_description: Create directories, write files and remove paths on a node in one module run
version_added: 0.9.0
author: sparkfleet maintainers (@sparkfleet)
description:
  - Creates every directory of O(directories) that is missing and writes every file of O(files)
    whose content differs, then sets each one's owner, group and mode where they differ; removes
    every path of O(absent) that exists (a directory with what it holds, a link itself, not its
    target). The directories first, in the order given, then the files, then the removals.
  - What M(ansible.builtin.file) and M(ansible.builtin.copy) do one path per module run, here for a
    stage's whole set of paths at once. A module run costs a node a fraction of a CPU-second
    (Python started, the payload unpacked and compiled) and a copy two of them per file, so a
    stage writing a program of six files and five directories paid for twenty-two.
  - A file is written to a temporary file in its directory and renamed over the old one (never
    half written); its owner, group and mode are set before the rename.
extends_documentation_fragment:
  - sparkfleet.serving.attributes
  - sparkfleet.serving.attributes.change_module
options:
  directories:
    description:
      - Directories to create (with their parents), given O(owner), O(group) and their mode.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: The directory.
        type: path
        required: true
      mode:
        description: Its mode, an octal string.
        type: str
        required: true
  files:
    description: Files to write, in directories that exist (O(directories) makes them first).
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: The file.
        type: path
        required: true
      content:
        description: Its whole content (text).
        type: str
        required: true
      mode:
        description: The file's mode, an octal string.
        type: str
        required: true
  owner:
    description: The owner of every directory and file.
    type: str
    default: root
  group:
    description: The group of every directory and file.
    type: str
    default: root
  absent:
    description: Paths to remove where they exist.
    type: list
    elements: path
    default: []
seealso:
  - module: ansible.builtin.file
  - module: ansible.builtin.copy
"""

EXAMPLES = r"""
- name: Install a program of two files in its own directory
  sparkfleet.serving.node_paths:
    directories:
      - {path: /opt/sparkfleet/lib, mode: "0755"}
    files:
      - path: /opt/sparkfleet/lib/tool.py
        content: "{{ lookup('ansible.builtin.file', 'tool.py', rstrip=false) }}"
        mode: "0644"
      - path: /opt/sparkfleet/lib/helper.py
        content: "{{ lookup('ansible.builtin.file', 'helper.py', rstrip=false) }}"
        mode: "0644"
"""

RETURN = r"""
changed_paths:
  description:
    - The paths created, written, given other attributes or removed (in check mode, that would be).
  returned: always
  type: list
  elements: str
"""

import os
import shutil
import tempfile

from ansible.module_utils.basic import AnsibleModule


def _attributes(module, spec, path, changed):
    """Owner, group and mode of PATH (SPEC's mode); True when something changed (or would)."""
    owner, group = module.params["owner"], module.params["group"]
    args = module.load_file_common_arguments(
        {"path": path, "owner": owner, "group": group, "mode": spec["mode"]}
    )
    return module.set_fs_attributes_if_different(args, changed)


def _directory(module, spec):
    path = spec["path"]
    if os.path.isdir(path):
        return _attributes(module, spec, path, False)
    if os.path.lexists(path):
        module.fail_json(msg=f"{path} exists and is not a directory; move it away and run again")
    if not module.check_mode:
        os.makedirs(path)
        _attributes(module, spec, path, True)
    return True


def _file(module, spec, diffs):
    path = spec["path"]
    want = spec["content"].encode("utf-8")
    before = None
    if os.path.lexists(path):
        if os.path.islink(path) or not os.path.isfile(path):
            module.fail_json(
                msg=f"{path} exists and is not a regular file; move it away, run again"
            )
        with open(path, "rb") as f:
            before = f.read()
    if before == want:
        return _attributes(module, spec, path, False)
    diffs.append(
        {
            "before_header": path,
            "after_header": path,
            "before": before.decode("utf-8", "replace") if before is not None else "",
            "after": spec["content"],
        }
    )
    if module.check_mode:
        return True
    directory = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(want)
        _attributes(module, spec, tmp, True)
        os.rename(tmp, path)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise
    return True


def _absent(module, path):
    if not os.path.lexists(path):
        return False
    if not module.check_mode:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    return True


def main():
    path_mode = {
        "path": {"type": "path", "required": True},
        "mode": {"type": "str", "required": True},
    }
    module = AnsibleModule(
        argument_spec={
            "directories": {
                "type": "list",
                "elements": "dict",
                "default": [],
                "options": path_mode,
            },
            "files": {
                "type": "list",
                "elements": "dict",
                "default": [],
                "options": {**path_mode, "content": {"type": "str", "required": True}},
            },
            "owner": {"type": "str", "default": "root"},
            "group": {"type": "str", "default": "root"},
            "absent": {"type": "list", "elements": "path", "default": []},
        },
        supports_check_mode=True,
    )
    changed, diffs = [], []
    for spec in module.params["directories"]:
        if _directory(module, spec):
            changed.append(spec["path"])
    for spec in module.params["files"]:
        if _file(module, spec, diffs):
            changed.append(spec["path"])
    changed.extend(path for path in module.params["absent"] if _absent(module, path))
    result = {"changed": bool(changed), "changed_paths": changed}
    if module._diff and diffs:
        result["diff"] = diffs
    module.exit_json(**result)


if __name__ == "__main__":
    main()
