#!/usr/bin/python
# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: model_weights_store
short_description: Inspect, repair, receive and seal a staged model revision on a node
version_added: 0.2.0
author: sparkfleet maintainers (@sparkfleet)
description:
  - Works on C(<store>/<org>--<repo>/<commit>/), the directory where a verified revision lives
    with its manifest C(.sparkfleet-manifest.json), and on its staging twin
    C(<store>/<org>--<repo>/.<commit>.partial/). Needs only the Python standard library.
  - O(step=info) reports whether the revision is staged and still verifies, and the state of
    every file (read-only; it re-hashes only files whose size, mtime or inode changed since they
    were last verified, or every file with O(verify=full)).
  - O(step=isolate) takes the files named in O(paths) out of a staged revision when they still
    fail verification (each is hashed again), with the Hugging Face cache blob under O(hf_hub)
    that is a hard link to the same file, so the engine loads neither. Files that verify stay.
  - O(step=receiving) makes the staging directory ready for a peer to fill it with rsync. For a
    staged revision that lacks files (a repair) the staging directory is made afresh with hard links
    to the files that are there, so the peer's rsync sends only the files RV(send) lists; the
    revision directory stays where the engine loads it. A directory without a usable manifest goes
    back to staging as a whole.
  - O(step=present) verifies every received file against O(manifest) (sha256). For a new
    revision it renames the staging directory into place; for a repair it renames each verified
    replacement into the revision directory. A mismatch fails naming node, file, expected and
    actual digest; a failed repair removes the staging directory.
extends_documentation_fragment:
  - sparkfleet.serving.attributes
  - sparkfleet.serving.attributes.change_module
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
    choices: [info, isolate, receiving, present]
    default: info
  manifest:
    description:
      - The manifest of the verified copy on the sending node; required for V(receiving) and
        V(present).
    type: dict
  paths:
    description: Files of the revision to take out when they fail verification (O(step=isolate)).
    type: list
    elements: str
    default: []
  hf_hub:
    description:
      - The Hugging Face cache's C(hub) directory where the revision is published (O(step=isolate)).
    type: path
  verify:
    description: V(quick) re-hashes files whose stat changed, V(full) every file.
    type: str
    choices: [quick, full]
    default: quick
  receiver:
    description:
      - The user a peer's rsync writes as (C(model_weights_ssh_user)) when it is not root. With
        O(step=receiving) the staging directory's directories are handed to it (it adds files,
        it cannot change the hard links of a repair); with O(step=present) all of it is taken
        back by the store's owner before anything is verified.
    type: str
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
files:
  description: Every file of the staged revision with its state (V(ok), V(corrupt), V(missing)).
  returned: when the revision has a manifest
  type: list
  elements: dict
removed:
  description: Files taken out of the revision (O(step=isolate)) or of the staging directory.
  returned: when O(step) is V(isolate) or V(receiving)
  type: list
  elements: str
send:
  description: Files the peer must send for a repair (O(step=receiving)); absent for a new revision.
  returned: when O(step=receiving) repairs
  type: list
  elements: str
placed:
  description: Files renamed into the revision directory by a repair (O(step=present)).
  returned: when O(step=present)
  type: list
  elements: str
"""

import os
import pwd
import shutil

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkfleet.serving.plugins.module_utils import _weights as weights


def _receiver(module, p):
    """The fan-out user's (uid, gid) that writes the staging directory, or None (root, unset)."""
    if not p["receiver"] or p["receiver"] == "root":
        return None
    try:
        entry = pwd.getpwnam(p["receiver"])
    except KeyError:
        module.fail_json(
            msg=f"{p['node']}: the fan-out user {p['receiver']} does not exist "
            "(model_weights_ssh_user)"
        )
    return (entry.pw_uid, entry.pw_gid)


def _inspect(module, p, final, part, given):
    """The revision's state in the store: (result, local manifest, status, failing files)."""
    repo, commit, full = p["repo"], p["commit"], p["verify"] == "full"
    local = (
        weights.load_json(os.path.join(final, weights.MANIFEST)) if os.path.isdir(final) else None
    )
    if local is not None and weights.manifest_matches(local, repo, commit):
        local = None
    status, bad, verified, rehashed = "absent", [], {}, False
    if local is not None:
        # Sealing a repair checks the replacements, not again the files that verified.
        bad, verified, rehashed = weights.check_revision(
            final, local, full and p["step"] != "present"
        )
        status = "corrupt" if bad else "present"
    elif os.path.isdir(final):
        status = "corrupt"
    reference = given or local
    missing = sum(b["size"] for b in bad)
    if status == "absent" and reference:
        have = weights.stat_records(part, reference["files"]) if os.path.isdir(part) else {}
        missing = sum(f["size"] for f in reference["files"] if f["path"] not in have)
    result = {"changed": False, "status": status, "bad": bad, "missing_bytes": missing}
    if local is not None:
        result["manifest"] = local
        result["files"] = weights.file_states(local, bad)
    if status == "present" and p["step"] in ("info", "receiving"):
        if rehashed and not module.check_mode:
            weights.write_json(
                os.path.join(final, weights.VERIFIED), verified
            )  # a cache, not a change
        module.exit_json(**result)
    return result, local, status, bad


def _isolate_step(module, p, final, local, result):
    """Step isolate: take the given files out of the revision's path."""
    if local is None:
        module.exit_json(removed=[], **result)
    removed, kept = weights.isolate(final, local, p["paths"], p["hf_hub"], module.check_mode)
    result.update(changed=bool(removed), removed=removed, kept=kept)
    module.exit_json(**result)


def _receive_repair(module, final, part, local, bad, receiver, result):
    """Step receiving for a repair: the failing files leave, the peer sends only those."""
    # A repair: the revision stays where the engine loads it, without the files
    # that fail (gone from its path); the peer sends only those, into an empty
    # staging directory (an old one is not trusted: its stat records may hide a
    # file changed in place).
    removed, _kept = weights.isolate(final, local, [b["path"] for b in bad])
    shutil.rmtree(part, ignore_errors=True)
    os.makedirs(part)
    weights.link_present(final, part, local)
    if receiver:
        weights.hand_over(part, *receiver, files=False)
    result.update(removed=removed, send=[e["path"] for e in weights.missing_entries(final, local)])
    module.exit_json(**result)


def _receiving_step(module, final, part, local, bad, given, receiver, result):
    """Step receiving: ready the staging directory the peer sends the revision into."""
    result["changed"] = True
    if module.check_mode:
        module.exit_json(**result)
    os.makedirs(os.path.dirname(part), exist_ok=True)
    if local is not None:
        _receive_repair(module, final, part, local, bad, receiver, result)
    if os.path.isdir(final) and not os.path.isdir(part):
        os.rename(final, part)  # no usable manifest: staged again as a whole
    os.makedirs(part, exist_ok=True)
    pbad, pverified = weights.check_revision(part, given, False)[:2]
    for entry in pbad:
        path = os.path.join(part, entry["path"])
        if os.path.isfile(path):
            os.unlink(path)
    weights.write_json(os.path.join(part, weights.VERIFIED), pverified)
    if receiver:
        weights.hand_over(part, *receiver, files=False)
    result["removed"] = [b["path"] for b in pbad if b["got"] != "missing"]
    module.exit_json(**result)


def _place_repair(module, p, final, part, local, status, result):
    """Step present for a repair: move the verified replacements into the revision."""
    if status == "present" and not os.path.isdir(part):
        module.exit_json(placed=[], **result)
    result["changed"] = True
    if module.check_mode:
        module.exit_json(placed=[], **result)
    try:
        placed = weights.complete(final, part, local)
    except weights.RepairError as exc:
        module.fail_json(
            msg=weights.repair_message(
                p["node"],
                p["repo"],
                p["commit"],
                exc.path,
                f"expected {exc.expected}, got {exc.got}",
                "the head's copy",
            ),
            **result,
        )
    result.update(status="present", bad=[], placed=placed, files=weights.file_states(local, []))
    module.exit_json(**result)


def _seal_received(module, p, final, part, given, result):
    """Step present for a new revision: verify what the peer sent, then seal it in place."""
    node, repo, commit = p["node"], p["repo"], p["commit"]
    result["changed"] = True
    if module.check_mode:
        module.exit_json(**result)
    if not os.path.isdir(part):
        module.fail_json(msg=f"{node}: nothing received for {repo}@{commit} in {part}", **result)
    pbad, pverified = weights.check_revision(part, given, p["verify"] == "full")[:2]
    if pbad:
        for entry in pbad:
            path = os.path.join(part, entry["path"])
            if os.path.isfile(path):
                os.unlink(path)
        weights.write_json(os.path.join(part, weights.VERIFIED), pverified)
        result["bad"] = pbad
        first = pbad[0]
        module.fail_json(
            msg=weights.mismatch_message(node, repo, first["path"], first["expected"], first["got"])
            + (f" ({len(pbad) - 1} more files failed)" if len(pbad) > 1 else ""),
            **result,
        )
    weights.write_json(os.path.join(part, weights.MANIFEST), given)
    weights.write_json(os.path.join(part, weights.VERIFIED), pverified)
    if os.path.isdir(final):
        # A directory without a usable manifest appeared meanwhile: not ours to replace.
        shutil.rmtree(part, ignore_errors=True)
        module.fail_json(
            msg=f"{node}: {final} appeared while {part} was being sealed (the staging "
            "directory was removed); fix: move that directory away, then re-run "
            "ansible-playbook sparkfleet.serving.site -i <inventory>",
            **result,
        )
    os.rename(part, final)
    result.update(status="present", manifest=given, files=weights.file_states(given, []))
    module.exit_json(**result)


def main():
    """Report, isolate, receive or seal one revision in the store (the step asked for)."""
    module = AnsibleModule(
        argument_spec={
            "store": {"type": "path", "required": True},
            "repo": {"type": "str", "required": True},
            "commit": {"type": "str", "required": True},
            "step": {
                "type": "str",
                "choices": ["info", "isolate", "receiving", "present"],
                "default": "info",
            },
            "manifest": {"type": "dict"},
            "paths": {"type": "list", "elements": "str", "default": []},
            "hf_hub": {"type": "path"},
            "verify": {"type": "str", "choices": ["quick", "full"], "default": "quick"},
            "node": {"type": "str", "default": "this node"},
            "receiver": {"type": "str"},
        },
        required_if=[("step", "receiving", ["manifest"]), ("step", "present", ["manifest"])],
        supports_check_mode=True,
    )
    p = module.params
    repo, commit, node = p["repo"], p["commit"], p["node"]
    error = weights.pin_error(f"commit of {repo}", commit)
    if error:
        module.fail_json(msg=f"{node}: {error}")
    receiver = _receiver(module, p)

    final = weights.revision_dir(p["store"], repo, commit)
    part = weights.partial_dir(p["store"], repo, commit)
    given = p["manifest"]
    if given is not None and weights.manifest_matches(given, repo, commit):
        module.fail_json(
            msg=f"{node}: the manifest given is not for {repo}@{commit}: "
            f"{weights.manifest_matches(given, repo, commit)}"
        )

    result, local, status, bad = _inspect(module, p, final, part, given)
    if p["step"] == "info":
        module.exit_json(**result)
    if p["step"] == "isolate":
        _isolate_step(module, p, final, local, result)
    if p["step"] == "receiving":
        _receiving_step(module, final, part, local, bad, given, receiver, result)

    # step == present: everything the peer sent must verify before it is moved in place,
    # owned by the store's owner again first (a fan-out user wrote it).
    if receiver and os.path.isdir(part) and not module.check_mode:
        owner = os.stat(p["store"])
        weights.hand_over(part, owner.st_uid, owner.st_gid)
    if local is not None:
        _place_repair(module, p, final, part, local, status, result)
    _seal_received(module, p, final, part, given, result)


if __name__ == "__main__":
    main()
