#!/usr/bin/python
# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: model_weights_store
short_description: Inspect, receive and seal a staged model revision on a node
version_added: 0.2.0
author: sparkfleet maintainers (@sparkfleet)
description:
  - Works on C(<store>/<org>--<repo>/<commit>/), the directory where a verified revision lives
    with its manifest C(.sparkfleet-manifest.json), and on its staging twin
    C(<store>/<org>--<repo>/.<commit>.partial/). Needs only the Python standard library.
  - O(step=info) reports whether the revision is staged and still verifies (read-only; it
    re-hashes only files whose size, mtime or inode changed since they were last verified, or
    every file with O(verify=full)).
  - O(step=receiving) makes the staging directory ready for a peer to fill it with rsync. A staged
    revision that no longer verifies goes back to staging and its bad files are removed, so the
    engine never loads them and rsync sends only what is missing.
  - O(step=present) verifies every received file against O(manifest) (sha256) and renames the
    staging directory into place. A mismatch removes the file and fails naming node, file,
    expected and actual digest.
extends_documentation_fragment:
  - sparkfleet.serving.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  idempotent:
    support: full
options:
  store:
    description: Directory holding staged revisions.
    type: path
    required: true
  repo:
    description: Model repository id (C(org/name)).
    type: str
    required: true
  commit:
    description: Commit sha of the revision.
    type: str
    required: true
  step:
    description: See the description.
    type: str
    choices: [info, receiving, present]
    default: info
  manifest:
    description:
      - The manifest of the verified copy on the sending node; required for V(receiving) and
        V(present).
    type: dict
  verify:
    description: V(quick) re-hashes files whose stat changed, V(full) every file.
    type: str
    choices: [quick, full]
    default: quick
  node:
    description: Name of this node in messages.
    type: str
    default: this node
"""

EXAMPLES = r"""
- name: Is the draft staged here?
  sparkfleet.serving.model_weights_store:
    store: /home/tiger/models/.sparkfleet-weights
    repo: z-lab/Qwen3.8-27B-DFlash2
    commit: 50307d4c4cde6860d4eee73e2547cd786fe8e8a4
  register: draft
"""

RETURN = r"""
status:
  description: V(present) (staged and verified), V(absent) or V(corrupt) (staged but a file fails).
  returned: always
  type: str
bad:
  description: Files that failed verification (path, expected, got).
  returned: always
  type: list
  elements: dict
manifest:
  description: The manifest of the staged revision (when present).
  returned: when present
  type: dict
missing_bytes:
  description: Bytes this node still lacks for the revision (needs O(manifest) or a local one).
  returned: always
  type: int
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkfleet.serving.plugins.module_utils._weights import (
    MANIFEST,
    VERIFIED,
    files_to_rehash,
    load_json,
    manifest_matches,
    mismatch_message,
    partial_dir,
    pin_error,
    revision_dir,
    stat_record,
    verify_file,
    write_json,
)


def _stats(root, files):
    out = {}
    for entry in files:
        path = os.path.join(root, entry["path"])
        if os.path.isfile(path):
            out[entry["path"]] = stat_record(path)
    return out


def check_dir(root, manifest, full):
    """(bad entries, verified records) of a directory against a manifest."""
    verified = load_json(os.path.join(root, VERIFIED)) or {}
    stats = _stats(root, manifest["files"])
    todo = set(files_to_rehash(manifest, verified, stats, full))
    bad = []
    for entry in manifest["files"]:
        if entry["path"] not in todo:
            continue
        ok, expected, got = verify_file(os.path.join(root, entry["path"]), dict(entry))
        if ok:
            verified[entry["path"]] = dict(stats[entry["path"]], sha256=entry["sha256"])
        else:
            verified.pop(entry["path"], None)
            bad.append(
                {"path": entry["path"], "expected": expected, "got": got, "size": entry["size"]}
            )
    return bad, verified, bool(todo)


def main():
    module = AnsibleModule(
        argument_spec={
            "store": {"type": "path", "required": True},
            "repo": {"type": "str", "required": True},
            "commit": {"type": "str", "required": True},
            "step": {
                "type": "str",
                "choices": ["info", "receiving", "present"],
                "default": "info",
            },
            "manifest": {"type": "dict"},
            "verify": {"type": "str", "choices": ["quick", "full"], "default": "quick"},
            "node": {"type": "str", "default": "this node"},
        },
        required_if=[("step", "receiving", ["manifest"]), ("step", "present", ["manifest"])],
        supports_check_mode=True,
    )
    p = module.params
    repo, commit, node, full = p["repo"], p["commit"], p["node"], p["verify"] == "full"
    error = pin_error(f"commit of {repo}", commit)
    if error:
        module.fail_json(msg=f"{node}: {error}")
    final = revision_dir(p["store"], repo, commit)
    part = partial_dir(p["store"], repo, commit)
    given = p["manifest"]
    if given is not None and manifest_matches(given, repo, commit):
        module.fail_json(
            msg=f"{node}: the manifest given is not for {repo}@{commit}: "
            f"{manifest_matches(given, repo, commit)}"
        )

    local = load_json(os.path.join(final, MANIFEST)) if os.path.isdir(final) else None
    status, bad, verified, rehashed = "absent", [], {}, False
    if local is not None and not manifest_matches(local, repo, commit):
        bad, verified, rehashed = check_dir(final, local, full)
        status = "corrupt" if bad else "present"
    elif os.path.isdir(final):
        status = "corrupt"
    reference = given or local
    missing = sum(b["size"] for b in bad)
    if status == "absent" and reference:
        have = _stats(part, reference["files"]) if os.path.isdir(part) else {}
        missing = sum(f["size"] for f in reference["files"] if f["path"] not in have)
    result = {"changed": False, "status": status, "bad": bad, "missing_bytes": missing}
    if status == "present":
        result["manifest"] = local
        if rehashed and not module.check_mode:
            write_json(os.path.join(final, VERIFIED), verified)  # a cache, not a change
        module.exit_json(**result)

    if p["step"] == "info":
        module.exit_json(**result)

    result["changed"] = True
    if module.check_mode:
        module.exit_json(**result)

    if p["step"] == "receiving":
        os.makedirs(os.path.dirname(part), exist_ok=True)
        if os.path.isdir(final) and not os.path.isdir(part):
            os.rename(final, part)
        os.makedirs(part, exist_ok=True)
        pbad, pverified = check_dir(part, given, False)[:2]
        for entry in pbad:
            path = os.path.join(part, entry["path"])
            if os.path.isfile(path):
                os.unlink(path)
        write_json(os.path.join(part, VERIFIED), pverified)
        result["removed"] = [b["path"] for b in pbad if b["got"] != "missing"]
        module.exit_json(**result)

    # step == present: everything the peer sent must verify before it is moved in place.
    if not os.path.isdir(part):
        module.fail_json(msg=f"{node}: nothing received for {repo}@{commit} in {part}", **result)
    pbad, pverified = check_dir(part, given, full)[:2]
    if pbad:
        for entry in pbad:
            path = os.path.join(part, entry["path"])
            if os.path.isfile(path):
                os.unlink(path)
        write_json(os.path.join(part, VERIFIED), pverified)
        result["bad"] = pbad
        first = pbad[0]
        module.fail_json(
            msg=mismatch_message(node, repo, first["path"], first["expected"], first["got"])
            + (f" ({len(pbad) - 1} more files failed)" if len(pbad) > 1 else ""),
            **result,
        )
    write_json(os.path.join(part, MANIFEST), given)
    write_json(os.path.join(part, VERIFIED), pverified)
    if os.path.isdir(final):
        module.fail_json(msg=f"{node}: {final} appeared while {part} was being sealed", **result)
    os.rename(part, final)
    result.update(status="present", manifest=given)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
