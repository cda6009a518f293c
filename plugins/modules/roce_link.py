#!/usr/bin/python
# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: roce_link
short_description: Set the live MTU, IPv4 addresses and link state of a data-plane NIC
version_added: 0.1.0
author: sparkfleet maintainers (@sparkfleet)
description:
  - Reads the NIC with C(ip -j addr show dev NAME), then runs only the C(ip) commands
    needed to reach the wanted MTU, add missing addresses, remove the addresses O(absent)
    names and bring the link up.
  - Removes no address but those O(absent) names (the teardown names the data-plane address
    the role configured) and never touches another NIC; the persistent side (netplan or
    networkd) is written by the C(sparkfleet.serving.roce) role.
extends_documentation_fragment:
  - sparkfleet.serving.attributes
  - sparkfleet.serving.attributes.full_module
options:
  name:
    description: The network interface, e.g. C(enp1s0f0np0).
    type: str
    required: true
  mtu:
    description: Wanted MTU. Left as it is when unset.
    type: int
  addresses:
    description: IPv4 addresses with prefix length (C(10.0.30.1/24)) that must be present.
    type: list
    elements: str
    default: []
  absent:
    description:
      - IPv4 addresses with prefix length that must not be on the NIC, removed where present
        (the same address with another prefix is left alone). An address may not be in both
        O(addresses) and O(absent).
    type: list
    elements: str
    default: []
  up:
    description: Bring the link up when it is down.
    type: bool
    default: true
requirements:
  - iproute2 (C(ip) with JSON output)
"""

EXAMPLES = r"""
- name: Jumbo frames and the data-plane address, live
  sparkfleet.serving.roce_link:
    name: enp1s0f0np0
    mtu: 9000
    addresses: [10.0.30.1/24]

- name: The MTU the port had before, and the data-plane address gone (the teardown)
  sparkfleet.serving.roce_link:
    name: enp1s0f0np0
    mtu: 1500
    absent: [10.0.30.1/24]
    up: false
"""

RETURN = r"""
commands:
  description: The C(ip) commands run (or, in check mode, that would run).
  returned: always
  type: list
  elements: str
  sample: ["ip link set dev enp1s0f0np0 mtu 9000"]
before:
  description: The NIC's state before the change.
  returned: always
  type: dict
  sample: {"name": "enp1s0f0np0", "mtu": 1500, "up": true, "ipv4": ["10.0.30.1/24"]}
after:
  description: The NIC's state after the change (read back; predicted in check mode).
  returned: always
  type: dict
  sample: {"name": "enp1s0f0np0", "mtu": 9000, "up": true, "ipv4": ["10.0.30.1/24"]}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkfleet.serving.plugins.module_utils._link import (
    LinkError,
    parse_ip_addr,
    plan,
    predict,
)


def _read(module, ip, name):
    rc, out, err = module.run_command(
        [ip, "-j", "addr", "show", "dev", name], environ_update={"LANG": "C"}
    )
    if rc != 0:
        module.fail_json(
            msg=f"{name}: no such network interface ({err.strip() or f'ip exited {rc}'})"
        )
    return parse_ip_addr(out, name)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", required=True),
            mtu=dict(type="int"),
            addresses=dict(type="list", elements="str", default=[]),
            absent=dict(type="list", elements="str", default=[]),
            up=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    name = module.params["name"]
    ip = module.get_bin_path("ip", required=True)
    try:
        before = _read(module, ip, name)
        steps = plan(
            before,
            module.params["mtu"],
            module.params["addresses"],
            module.params["up"],
            module.params["absent"],
        )
    except (LinkError, ValueError) as exc:
        module.fail_json(msg=str(exc))
    commands = ["ip " + " ".join(step) for step in steps]
    if steps and not module.check_mode:
        for step in steps:
            rc, _out, err = module.run_command([ip, *step], environ_update={"LANG": "C"})
            if rc != 0:
                module.fail_json(
                    msg=f"{name}: `ip {' '.join(step)}` failed: {err.strip()}", commands=commands
                )
        after = _read(module, ip, name)
    else:
        after = predict(before, steps)
    result = dict(changed=bool(steps), commands=commands, before=before, after=after)
    if module._diff:
        result["diff"] = dict(before=before, after=after)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
