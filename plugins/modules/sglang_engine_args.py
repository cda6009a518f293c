#!/usr/bin/python
# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_engine_args
short_description: Parse a rank's launch arguments with the engine's own parser in its image
version_added: 0.3.0
description:
  - Runs SGLang's own argument parser (C(ServerArgs.add_cli_args), as C(python -m
    sglang.launch_server) builds it) on a rank's launch arguments in a throwaway container of
    the image, with no GPU, no network and nothing of the node mounted, so a launch the
    engine would refuse is known before anything stops.
  - The same rule as the rank launcher's C(check), which runs it before every start. The
    verdict is kept per image id and arguments in O(state_dir), where the launcher finds it.
  - Fails when the engine refuses an argument, naming the image, the argument and the
    profile field that rendered it.
  - An image that is not on the node, or whose parse cannot run, is no refusal (the start
    itself is the engine's last word); RV(verdict) says so.
author: sparkfleet maintainers (@sparkfleet)
extends_documentation_fragment:
  - sparkfleet.serving.attributes
attributes:
  check_mode:
    support: full
    details:
      - The parse starts nothing and changes nothing on the node but its kept verdicts, so it
        runs the same in check mode.
  diff_mode:
    support: N/A
    details:
      - The module changes nothing, so there is nothing to diff.
  idempotent:
    support: full
options:
  image:
    description:
      - The image the rank would run, as the profile names it (a tag or an image id).
    type: str
    required: true
  command:
    description:
      - The rank's command as the launcher runs it in the image, the output of the
        P(sparkfleet.serving.sglang_python_command#filter) filter followed by that of
        P(sparkfleet.serving.sglang_server_args#filter).
      - The API key is never read; a placeholder stands in for it.
    type: list
    elements: str
    required: true
  state_dir:
    description:
      - The launcher's state directory (the directory of C(sglang_node_stopped_mark)), where the
        verdicts are kept.
    type: path
    default: /var/lib/sparkfleet
  name:
    description:
      - The throwaway container's name.
    type: str
    default: sparkfleet-argcheck
seealso:
  - module: sparkfleet.serving.sglang_health
"""

EXAMPLES = r"""
- name: Parse a candidate's launch with the engine in its image before production stops
  sparkfleet.serving.sglang_engine_args:
    image: "{{ sglang_engine.image }}"
    command: >-
      {{ sglang_engine | sparkfleet.serving.sglang_python_command(false)
         + sglang_engine | sparkfleet.serving.sglang_server_args(spark_rank, head_ipv4) }}
  vars:
    head_ipv4: "{{ hostvars[cluster_head].roce_ipv4 }}"
"""

RETURN = r"""
verdict:
  description:
    - V(ok) when the engine accepts the arguments, V(refused) when it refuses them (the module
      fails), V(unavailable) when no parse could run (see RV(msg)).
  returned: always
  type: str
  sample: ok
image_id:
  description: The image id the arguments were parsed in, empty when the image is not on the node.
  returned: always
  type: str
  sample: sha256:4f7e8a...
msg:
  description: The refusal, or why no parse could run; empty when the engine accepted.
  returned: always
  type: str
  sample: ""
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkfleet.serving.plugins.module_utils import (
    _engine_args,
    _profile_schema,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            image=dict(type="str", required=True),
            command=dict(type="list", elements="str", required=True),
            state_dir=dict(type="path", default="/var/lib/sparkfleet"),
            name=dict(type="str", default="sparkfleet-argcheck"),
        ),
        supports_check_mode=True,
    )
    image = module.params["image"]
    rc, out, _err = module.run_command(
        [
            module.get_bin_path("docker", required=True),
            "image",
            "inspect",
            "--format",
            "{{.Id}}",
            image,
        ]
    )
    if rc != 0:
        module.exit_json(
            changed=False,
            verdict="unavailable",
            image_id="",
            msg=f"image {image} is not on this node; its start is the engine's first word",
        )
    image_id = out.strip()
    refused, why = _engine_args.check(
        image,
        image_id,
        module.params["command"],
        module.params["state_dir"],
        module.params["name"],
        _profile_schema.server_flags(),
    )
    if refused:
        module.fail_json(msg=refused, changed=False, verdict="refused", image_id=image_id)
    module.exit_json(
        changed=False,
        verdict="unavailable" if why else "ok",
        image_id=image_id,
        msg=why or "",
    )


if __name__ == "__main__":
    main()
