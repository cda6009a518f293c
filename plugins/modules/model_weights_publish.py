#!/usr/bin/python
# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: model_weights_publish
short_description: Put a verified model revision where the engine loads it
version_added: 0.2.0
author: sparkfleet maintainers (@sparkfleet)
description:
  - O(src) is a verified revision directory (it carries C(.sparkfleet-manifest.json)).
  - O(link) becomes a relative symlink to O(src) (the engine's C(--model-path)); switching to a new
    revision is one atomic rename. Something else already at O(link) (a directory staged by hand)
    is moved aside to C(<link>.pre-sparkfleet), never deleted.
  - O(hf_hub) lays the revision out in the Hugging Face cache (C(models--org--name/blobs/<etag>),
    C(snapshots/<commit>/<file>) -> C(../../blobs/<etag>)), so an engine started with
    E(HF_HUB_OFFLINE=1) finds the draft model by repo id and revision without the network. Blobs are
    hard links to the store when it is on the same filesystem, copies otherwise; the snapshot
    directory appears atomically.
  - O(copies) copies single files out of the revision (the chat template the profile mounts); a
    name the revision does not carry is skipped and listed in RV(skipped).
extends_documentation_fragment:
  - sparkfleet.serving.attributes
  - sparkfleet.serving.attributes.change_module
options:
  src:
    description: Verified revision directory.
    type: path
    required: true
  link:
    description: Path to point at O(src) with a relative symlink.
    type: path
  hf_hub:
    description: The Hugging Face cache's C(hub) directory on this node (host side of the mount).
    type: path
  repo:
    description: Repository id, for O(hf_hub).
    type: str
  commit:
    description: Commit sha, for O(hf_hub).
    type: str
  copies:
    description: Files to copy out of the revision.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: Path inside the revision.
        type: str
        required: true
      dest:
        description: Destination file.
        type: path
        required: true
"""

EXAMPLES = r"""
- name: Point model_path at the verified revision
  sparkfleet.serving.model_weights_publish:
    src: "/home/tiger/models/.sparkfleet-weights/RadixArk--Qwen3.8-27B-NVFP4-BF16-LMHead/\
      0123456789abcdef0123456789abcdef01234567"
    link: /home/tiger/models/RadixArk/Qwen3.8-27B-NVFP4-BF16-LMHead
"""

RETURN = r"""
actions:
  description: What was (or in check mode would be) done, one line each.
  returned: always
  type: list
  elements: str
skipped:
  description: Names in O(copies) that the revision does not carry.
  returned: always
  type: list
  elements: str
"""

import hashlib
import os
import shutil
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkfleet.serving.plugins.module_utils._weights import (
    MANIFEST,
    hf_cache_dirname,
    load_json,
)


def _aside(path):
    target = f"{path}.pre-sparkfleet"
    if os.path.lexists(target):
        target = f"{target}-{time.strftime('%Y%m%dT%H%M%S')}"
    os.rename(path, target)
    return target


def _symlink(target, path):
    tmp = f"{os.path.dirname(path)}/.{os.path.basename(path)}.sparkfleet-tmp"
    if os.path.lexists(tmp):
        os.unlink(tmp)
    os.symlink(target, tmp)
    os.replace(tmp, path)


def _digest(path):
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def _point(path, target, check, actions):
    """Make path a symlink to target; a file or directory there that is not ours is moved
    aside, never removed."""
    if os.path.islink(path) and os.readlink(path) == target:
        return
    if os.path.lexists(path) and not os.path.islink(path):
        actions.append(f"move {path} aside to {path}.pre-sparkfleet (it is not ours)")
        if not check:
            _aside(path)
    actions.append(f"point {path} at {target}")
    if not check:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        _symlink(target, path)


def publish_link(src, link, check, actions):
    _point(link, os.path.relpath(src, os.path.dirname(link)), check, actions)


def _blob_ok(blob, source):
    if not os.path.isfile(blob) or os.path.islink(blob):
        return False
    a, b = os.stat(blob), os.stat(source)
    if (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino):
        return True
    return a.st_size == b.st_size and a.st_mtime_ns == b.st_mtime_ns


def publish_hf(src, hub, repo, commit, files, check, actions):
    root = os.path.join(hub, hf_cache_dirname(repo))
    blobs, snapshot = os.path.join(root, "blobs"), os.path.join(root, "snapshots", commit)
    if not check:
        os.makedirs(blobs, exist_ok=True)
    for entry in files:
        source = os.path.join(src, entry["path"])
        blob = os.path.join(blobs, entry["etag"])
        if not _blob_ok(blob, source):
            actions.append(f"place blob {entry['etag']} ({entry['path']}) in {blobs}")
            if not check:
                tmp = f"{blob}.sparkfleet-tmp"
                if os.path.lexists(tmp):
                    os.unlink(tmp)
                try:
                    os.link(source, tmp)
                except OSError:
                    shutil.copy2(source, tmp)
                os.replace(tmp, blob)
    wanted = {
        entry["path"]: os.path.relpath(
            os.path.join(blobs, entry["etag"]),
            os.path.dirname(os.path.join(snapshot, entry["path"])),
        )
        for entry in files
    }
    if not os.path.isdir(snapshot):
        actions.append(f"create snapshot {snapshot}")
        if check:
            return
        tmp = os.path.join(root, "snapshots", f".{commit}.sparkfleet-tmp")
        shutil.rmtree(tmp, ignore_errors=True)  # our own leftover of an interrupted run
        for name, target in wanted.items():
            os.makedirs(os.path.dirname(os.path.join(tmp, name)), exist_ok=True)
            os.symlink(target, os.path.join(tmp, name))
        os.rename(tmp, snapshot)
        return
    for name, target in wanted.items():
        _point(os.path.join(snapshot, name), target, check, actions)


def publish_copy(src, name, dest, check, actions):
    source = os.path.join(src, name)
    if os.path.isfile(dest) and _digest(dest) == _digest(source):
        return
    if os.path.lexists(dest) and not os.path.lexists(f"{dest}.pre-sparkfleet"):
        actions.append(f"keep the previous {dest} as {dest}.pre-sparkfleet")
        if not check:
            shutil.copy2(dest, f"{dest}.pre-sparkfleet")
    actions.append(f"copy {name} to {dest}")
    if check:
        return
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    tmp = f"{os.path.dirname(dest)}/.{os.path.basename(dest)}.sparkfleet-tmp"
    shutil.copyfile(source, tmp)
    os.chmod(tmp, 0o644)
    os.replace(tmp, dest)


def main():
    module = AnsibleModule(
        argument_spec={
            "src": {"type": "path", "required": True},
            "link": {"type": "path"},
            "hf_hub": {"type": "path"},
            "repo": {"type": "str"},
            "commit": {"type": "str"},
            "copies": {
                "type": "list",
                "elements": "dict",
                "default": [],
                "options": {
                    "name": {"type": "str", "required": True},
                    "dest": {"type": "path", "required": True},
                },
            },
        },
        required_by={"hf_hub": ["repo", "commit"]},
        supports_check_mode=True,
    )
    p = module.params
    manifest = load_json(os.path.join(p["src"], MANIFEST))
    if not manifest:
        module.fail_json(msg=f"{p['src']} is not a verified revision (no {MANIFEST})")
    actions = []
    if p["link"]:
        publish_link(p["src"], p["link"], module.check_mode, actions)
    if p["hf_hub"]:
        publish_hf(
            p["src"],
            p["hf_hub"],
            p["repo"],
            p["commit"],
            manifest["files"],
            module.check_mode,
            actions,
        )
    names = {f["path"] for f in manifest["files"]}
    skipped = []
    for item in p["copies"]:
        if item["name"] not in names:
            # The profile's file does not come from this repository: not ours to stage.
            skipped.append(item["name"])
            continue
        publish_copy(p["src"], item["name"], item["dest"], module.check_mode, actions)
    module.exit_json(changed=bool(actions), actions=actions, skipped=skipped)


if __name__ == "__main__":
    main()
