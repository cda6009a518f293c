#!/usr/bin/python
# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: sglang_patch
short_description: Apply named HARDEN patches to an SGLang source file
version_added: 0.1.0
description:
  - Reads an original SGLang source file (O(src)), applies the named patches in memory
    and writes the result to O(dest), to be bind-mounted over the file in the image.
  - Anchors are found by the structure of the code (class, method and statement shape),
    not by line numbers, so one patch applies to every SGLang 0.5.x release that has the
    target code. The rest of the file is kept byte for byte.
  - Each patch marks the code it inserts with a comment C(HARDEN-PATCH <name>); run
    C(grep HARDEN-PATCH) inside the container to prove that a patch is live.
  - A patch whose marker O(src) already carries is not applied twice, so O(src) may be a
    file patched before.
  - All patches are computed first and the result must compile. If an anchor is missing
    or the result does not compile the module fails, naming the patch, the file and what
    it expected, and O(dest) is left as it was. O(dest) is written atomically or not at all.
author: sparkfleet maintainers (@sparkfleet)
extends_documentation_fragment:
  - ansible.builtin.files
  - sparkfleet.serving.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
    details:
      - The diff shows the content of O(dest) before and after.
  idempotent:
    support: full
options:
  src:
    description:
      - Path of the original file on the managed node, for example C(tokenizer_manager.py)
        or C(watchdog.py) extracted from the pinned image.
    type: path
    required: true
  dest:
    description:
      - Path of the patched file to write. Its directory must exist.
      - Written through a temporary file in the same directory, then moved into place.
      - When O(mode) is not set, an existing O(dest) keeps its mode and a new one gets the
        default permissions of the umask. Set O(mode) explicitly, for example V('0644'),
        so that the container can read the bind-mounted file.
    type: path
    required: true
  patches:
    description:
      - Names of the patches to apply, in order. Duplicates are ignored.
      - V(max_tokens_clamp) (C(tokenizer_manager.py)) in C(TokenizerManager._validate_one_request),
        right after C(max_new_tokens = obj.sampling_params.get("max_new_tokens")) and before the
        context-length check, raises any C(0 < max_new_tokens < min_new_tokens) to
        O(min_new_tokens), in the request's own sampling params and in the local variable,
        so truncation still applies to the clamped value. Requests asking for 0 or no limit,
        and the server's own health probes (rid starting with C(HEALTH_CHECK)), are left alone.
        With speculative decoding a request for no more tokens than there are draft tokens
        wedges the scheduler, and the watchdog then kills every rank.
      - V(watchdog_stack_dump) (C(watchdog.py), SGLang 0.5.7 and later) in
        C(WatchdogRaw._watchdog_once), once the wait loop has timed out and before the py-spy
        dump, logs every thread's Python stack with its name and ident through the module's
        logger, so a hang leaves a stack even where py-spy cannot dump.
      - V(sm12x_gate) rewrites every exact compute-capability gate for (12, 0)
        (C(<expr> == (12, 0)), C(!=) forms, C(major == 12 and minor == 0)) to compare the
        major version only, so GB10, which reports (12, 1), passes gates written for SM120.
        Fails when the file has no such gate.
    type: list
    elements: str
    choices: [max_tokens_clamp, watchdog_stack_dump, sm12x_gate]
    required: true
  min_new_tokens:
    description:
      - The smallest C(max_new_tokens) that V(max_tokens_clamp) lets through. Keep it above the
        number of speculative draft tokens (C(--speculative-num-draft-tokens)).
      - Only used by V(max_tokens_clamp), and only when O(src) does not carry that patch yet.
    type: int
    default: 16
seealso:
  - name: SGLang
    description: The serving engine whose files this module patches.
    link: https://github.com/sgl-project/sglang
"""

EXAMPLES = r"""
- name: Patch tokenizer_manager.py for the bind mount
  sparkfleet.serving.sglang_patch:
    src: /opt/sparkfleet/sglang/original/tokenizer_manager.py
    dest: /opt/sparkfleet/sglang/patched/tokenizer_manager.py
    patches:
      - max_tokens_clamp
    min_new_tokens: 16
    mode: "0644"
  register: __sglang_patch_tm

# One file a patch, as the sglang_patches role applies them: every thread's stack in the log
# when the watchdog fires, and an SM120-only gate widened so GB10 (SM121) passes it.
- name: Patch watchdog.py and common.py
  sparkfleet.serving.sglang_patch:
    src: "/opt/sparkfleet/sglang/original/{{ item.file }}"
    dest: "/opt/sparkfleet/sglang/patched/{{ item.file }}"
    patches: ["{{ item.patch }}"]
    mode: "0644"
  loop:
    - {file: watchdog.py, patch: watchdog_stack_dump}
    - {file: common.py, patch: sm12x_gate}
"""

RETURN = r"""
applied:
  description:
    - The requested patches that the written content carries, in the order given, including
      those that O(src) already carried (see RV(already_present)).
  returned: success
  type: list
  elements: str
  sample: [max_tokens_clamp]
already_present:
  description:
    - The requested patches whose marker O(src) already carried; they were not applied again.
  returned: success
  type: list
  elements: str
  sample: []
src_sha256:
  description: SHA-256 of O(src).
  returned: success
  type: str
  sample: 3f1c0e7a4b2d9e8f6a5c4b3a29180f7e6d5c4b3a29180f7e6d5c4b3a29180f7e
dest_sha256:
  description:
    - SHA-256 of the resulting content of O(dest); in check mode, of the content it would get.
  returned: success
  type: str
  sample: 9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b
dest:
  description: The path written.
  returned: success
  type: str
  sample: /opt/sparkfleet/sglang/patched/tokenizer_manager.py
"""

import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.sparkfleet.serving.plugins.module_utils._patch import (
    DEFAULT_MIN_NEW_TOKENS,
    PATCH_NAMES,
    PatchError,
    apply_patches,
    sha256_hex,
)


def _read(module, path, what):
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        module.fail_json(msg=f"cannot read {what} {path}: {to_native(exc)}")


def _write(module, dest, data):
    """Write ``data`` to a temporary file next to ``dest``, then move it into place."""
    fd, tmp = tempfile.mkstemp(prefix=".sglang_patch.", suffix=".tmp", dir=os.path.dirname(dest))
    module.add_cleanup_file(tmp)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
    except OSError as exc:
        module.fail_json(msg=f"cannot write a temporary file next to {dest}: {to_native(exc)}")
    module.atomic_move(tmp, dest, unsafe_writes=module.params["unsafe_writes"])


def main():
    module = AnsibleModule(
        argument_spec=dict(
            src=dict(type="path", required=True),
            dest=dict(type="path", required=True),
            patches=dict(type="list", elements="str", required=True, choices=list(PATCH_NAMES)),
            min_new_tokens=dict(type="int", default=DEFAULT_MIN_NEW_TOKENS, no_log=False),
        ),
        add_file_common_args=True,
        supports_check_mode=True,
    )
    src = module.params["src"]
    dest = module.params["dest"]

    source = _read(module, src, "src")
    try:
        text = source.decode("utf-8")
    except UnicodeDecodeError as exc:
        module.fail_json(msg=f"src {src} is not UTF-8 text: {to_native(exc)}")
    try:
        result = apply_patches(
            text, module.params["patches"], path=src, min_new_tokens=module.params["min_new_tokens"]
        )
    except (PatchError, ValueError) as exc:
        module.fail_json(
            msg=f"{to_native(exc)}; {dest} left unchanged",
            src_sha256=sha256_hex(source),
        )
    new = result.text.encode("utf-8")

    if os.path.isdir(dest):
        module.fail_json(msg=f"dest {dest} is a directory; expected a file path")
    if not os.path.isdir(os.path.dirname(dest) or "."):
        module.fail_json(msg=f"the directory of dest {dest} does not exist")
    exists = os.path.lexists(dest)
    old = _read(module, dest, "dest") if exists else None
    changed = old != new

    if changed and not module.check_mode:
        _write(module, dest, new)
    file_args = module.load_file_common_arguments(module.params, path=dest)
    if os.path.exists(dest):
        # In check mode this only predicts; after a write it applies mode/owner/...
        changed = module.set_fs_attributes_if_different(file_args, changed)

    out = dict(
        changed=changed,
        dest=dest,
        applied=result.applied,
        already_present=result.already_present,
        src_sha256=sha256_hex(source),
        dest_sha256=sha256_hex(new),
    )
    if module._diff and old != new:
        out["diff"] = dict(
            before_header=dest,
            after_header=dest,
            before="" if old is None else old.decode("utf-8", errors="replace"),
            after=result.text,
        )
    module.exit_json(**out)


if __name__ == "__main__":
    main()
