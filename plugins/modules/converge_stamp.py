#!/usr/bin/python
# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: converge_stamp
short_description: Record what a stage left on a node, so the next run can skip it
version_added: 0.3.0
author: sparkfleet maintainers (@sparkfleet)
description:
  - Writes a stage's converge stamp, a small JSON file - the digest of the stage's inputs, the
    state of every path it manages as it is now (type, mode, owner, group, sha256 or link target,
    or absence) and the facts the stage published for the stages after it.
  - The next run reads the stamp with M(sparkfleet.serving.spark_node_info) and skips the stage as
    a whole when the digest is the same and every path is as recorded; any hand edit of a recorded
    path makes the stage run again and put it back.
  - The file is written to a temporary file in the same directory and renamed (never half
    written), mode C(0600), in a directory of mode C(0700).
extends_documentation_fragment:
  - sparkfleet.serving.attributes
  - sparkfleet.serving.attributes.change_module
options:
  path:
    description: The stamp file.
    type: path
    required: true
  stage:
    description: The stage's name.
    type: str
    required: true
  digest:
    description: The digest of the stage's inputs, computed on the controller.
    type: str
    required: true
  paths:
    description: Every path the stage manages on this node (absent ones are recorded as absent).
    type: list
    elements: path
    default: []
  outputs:
    description: Facts the stage published, returned to later runs that skip it.
    type: dict
    default: {}
seealso:
  - module: sparkfleet.serving.spark_node_info
"""

EXAMPLES = r"""
- name: Record the RoCE stage
  sparkfleet.serving.converge_stamp:
    path: /var/lib/sparkfleet/converge/roce.json
    stage: roce
    digest: "{{ __digest }}"
    paths: [/etc/netplan/60-sparkfleet-roce.yaml]
    outputs:
      roce_node: "{{ roce_node }}"
"""

RETURN = r"""
stamp:
  description: The stamp as written (or, in check mode, as it would be).
  returned: always
  type: dict
"""

import json
import os
import tempfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkfleet.serving.plugins.module_utils._converge import stamp
from ansible_collections.sparkfleet.serving.plugins.module_utils._node_state import (
    json_record,
    path_record,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            stage=dict(type="str", required=True),
            digest=dict(type="str", required=True),
            paths=dict(type="list", elements="path", default=[]),
            outputs=dict(type="dict", default={}),
        ),
        supports_check_mode=True,
    )
    p = module.params
    records = {path: path_record(path) for path in p["paths"]}
    errors = [r["error"] for r in records.values() if r.get("error")]
    if errors:
        module.fail_json(msg=f"cannot record stage {p['stage']}: {'; '.join(errors)}")
    new = stamp(p["stage"], p["digest"], records, p["outputs"])
    old = json_record(p["path"]).get("content")
    if old == new:
        module.exit_json(changed=False, stamp=new)
    if not module.check_mode:
        folder = os.path.dirname(p["path"])
        os.makedirs(folder, mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".stamp-")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(new, handle, indent=1, sort_keys=True)
                handle.write("\n")
            os.chmod(tmp, 0o600)
            os.replace(tmp, p["path"])
        except OSError as exc:
            if os.path.exists(tmp):
                os.unlink(tmp)
            module.fail_json(msg=f"cannot write {p['path']}: {exc}")
    module.exit_json(changed=True, stamp=new)


if __name__ == "__main__":
    main()
