#!/usr/bin/python
# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: canary_probe
short_description: Put one canary candidate engine through boot, smokes, decode and stability
version_added: 0.2.0
description:
  - Runs on the node whose API the candidate serves (usually the head, on loopback) and
    probes it in the canary's order, the order of the DS4-F dual-Spark canary
    (seed 000); boot (C(/health) then the served model in C(/v1/models)), the exact-string
    gate, C(17x19=323), a short count with a small C(max_tokens), single-stream decode
    runs one at a time, then a stability phase of sequential requests.
  - Counts every completion it gets. The first request the engine never answers (refused,
    reset or silent past O(request_timeout)) ends the probe and is returned in
    RV(result.died) with the number of completions before it, so a hang is a result,
    never a failure of the task.
  - The module fails only on bad parameters.
author: sparkfleet maintainers (@sparkfleet)
extends_documentation_fragment:
  - sparkfleet.serving.attributes
attributes:
  check_mode:
    support: none
    details:
      - The probe generates text on the candidate; Ansible skips it in check mode.
  diff_mode:
    support: N/A
    details:
      - The module changes nothing on the node.
  idempotent:
    support: N/A
    details:
      - A measurement; every run sends new requests.
options:
  url:
    description: Base URL of the candidate's HTTP API, without C(/v1).
    type: str
    required: true
  api_key:
    description: The key the candidate was started with, if any.
    type: str
  served_model_name:
    description: The name the candidate serves the model under.
    type: str
    required: true
  boot_timeout:
    description: Seconds the boot phase waits for a healthy API.
    type: int
    default: 1200
  poll_interval:
    description: Seconds between two boot polls.
    type: int
    default: 2
  request_timeout:
    description:
      - Socket timeout of every request after boot. A request the engine stays silent on
        for longer counts as the engine's death (a hang that no watchdog ended).
    type: int
    default: 420
  short_max_tokens:
    description: C(max_tokens) of the short count.
    type: int
    default: 8
  decode_runs:
    description: Single-stream decode runs (each streamed, time to first token excluded).
    type: int
    default: 3
  decode_max_tokens:
    description: C(max_tokens) of each decode run.
    type: int
    default: 64
  stability_requests:
    description: Sequential requests of the stability phase (exact and math, alternating).
    type: int
    default: 5
  boot_only:
    description: Stop after the boot phase (to look at the booted engine before the requests).
    type: bool
    default: false
  alive_command:
    description:
      - Command run between boot polls; when it exits non-zero or prints something other
        than C(running ...), the engine is taken as exited and the boot as failed at once
        (for example the canary launcher's C(status)).
    type: list
    elements: str
  chat_template_kwargs:
    description: Sent as C(chat_template_kwargs) with every chat completion.
    type: dict
    default:
      enable_thinking: false
seealso:
  - module: sparkfleet.serving.sglang_health
"""

EXAMPLES = r"""
- name: Probe the candidate on loopback
  sparkfleet.serving.canary_probe:
    url: http://127.0.0.1:8890
    served_model_name: flash-0731
    alive_command: [/usr/local/sbin/sparkfleet-sglang-canary, status]
    request_timeout: 420
  register: __probe
"""

RETURN = r"""
result:
  description: What the candidate did in each phase.
  returned: always
  type: dict
  contains:
    boot:
      description: C(ok), C(seconds) to a healthy API with the model listed, C(detail).
      type: dict
      returned: always
    exact:
      description:
        - The exact-string gate (C(passed), C(status), C(detail), C(excerpt)); null if not reached.
      type: dict
      returned: always
    math:
      description: The 17x19 check, same keys; null if not reached.
      type: dict
      returned: always
    short:
      description: The short count, same keys; null if not reached.
      type: dict
      returned: always
    decode_runs:
      description:
        - One entry per decode run reached (C(passed), C(tokens_per_s), C(completion_tokens),
          C(detail)).
      type: list
      elements: dict
      returned: always
    stability:
      description: One entry per stability request reached.
      type: list
      elements: dict
      returned: always
    completions:
      description: Requests the candidate answered with HTTP 200.
      type: int
      returned: always
    died:
      description:
        - null while the candidate answered everything; else C(phase), C(request),
          C(after_completions) and C(reason) of the first request it never answered.
      type: dict
      returned: always
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkfleet.serving.plugins.module_utils._canary import CandidateProbe
from ansible_collections.sparkfleet.serving.plugins.module_utils._health import (
    argument_spec,
    runner_from_params,
    validate_params,
)


def main():
    module = AnsibleModule(
        argument_spec=argument_spec(
            {"boot_timeout": dict(type="int", default=1200)},
            {
                "stability_requests": dict(type="int", default=5),
                "boot_only": dict(type="bool", default=False),
                "alive_command": dict(type="list", elements="str"),
            },
            served_model_name={"required": True},
            poll_interval={"default": 2},
            request_timeout={"default": 420},
            decode_max_tokens={"default": 64},
        ),
        supports_check_mode=False,
    )
    params = module.params
    errors = validate_params(dict(params, timeout=params["boot_timeout"]))
    if params["stability_requests"] < 0:
        errors.append("stability_requests must be at least 0")
    if errors:
        module.fail_json(msg="; ".join(errors))

    def alive():
        if not params["alive_command"]:
            return True, ""
        rc, out, err = module.run_command(params["alive_command"], environ_update={"LANG": "C"})
        out = out.strip()
        return rc == 0 and out.startswith("running"), out or err.strip()

    runner = runner_from_params(params)
    probe = CandidateProbe(
        runner,
        boot_timeout=params["boot_timeout"],
        poll_interval=params["poll_interval"],
        decode_runs=params["decode_runs"],
        stability_requests=params["stability_requests"],
        alive=alive,
    )
    if params["boot_only"]:
        module.exit_json(changed=False, result={"boot": probe.boot()})
    module.exit_json(changed=False, result=probe.run())


if __name__ == "__main__":
    main()
