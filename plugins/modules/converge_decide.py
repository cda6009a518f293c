#!/usr/bin/python
# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: converge_decide
short_description: Decide on the controller whether a converge stage runs on a node
version_added: 0.2.0
author: sparkfleet maintainers (@sparkfleet)
description:
  - Computes the stage's digest on the controller (the values of every option the argument
    specs of O(roles) declare, the cluster's nodes from C(preflight_cluster), the roles' files
    and the collection's plugins) and compares it, with every path the stage recorded, against
    the stamp the converge probe read (C(converge_node), role P(sparkfleet.serving.converge#role)).
    Adds the caller's O(live) reasons. It never connects to a host.
  - Sets the facts C(converge_digests), C(converge_reasons) and C(converge_run) (each keyed by
    stage). A stage is entered when something differs, when C(converge_skip) is off, or in a
    play without the probe (nothing is recorded there).
  - A stage that acts across nodes (the weights fan-out, the patches, the control path) runs
    on every node when any differs; a second call with O(across=true), after every node made
    its own, decides that.
extends_documentation_fragment:
  - sparkfleet.serving.attributes
  - sparkfleet.serving.attributes.info_module
attributes:
  action:
    support: full
    description: Runs on the controller as an action plugin.
options:
  stage:
    description: The stage (its stamp is C(<converge_dir>/<stage>.json) on each node).
    type: str
    required: true
    choices: [roce, weights, patches, launch, control, watchdog]
  roles:
    description:
      - The role entry points (C(role:entry)) whose argument specs and files make the stage's
        digest. Required unless O(across=true).
    type: list
    elements: str
  engine_fields:
    description:
      - The fields of the resolved engine profile (C(sglang_engine)) the stage reads, when it
        reads only some; a change to another field then does not enter it. Omitted, every
        field counts.
      - Of every node's cluster variables a stage takes only the ones it declares and each
        node's identity (name, rank, addresses).
    type: list
    elements: str
  live:
    description: Reasons from the caller's live checks (an MTU, an address, a container).
    type: list
    elements: str
    default: []
  across:
    description: Enter the stage on every node of the play when any of them has a reason.
    type: bool
    default: false
notes:
  - Reads C(converge_node), C(converge_dir), C(converge_skip), C(preflight_cluster) and the
    options it digests from the play's variables.
"""

EXAMPLES = r"""
- name: Compare the data plane with what the node holds
  sparkfleet.serving.converge_decide:
    stage: roce
    roles: ['roce:main']

- name: Compare the patched files with what the nodes hold
  sparkfleet.serving.converge_decide:
    stage: patches
    roles: ['sglang_patches:main']
    engine_fields: [image, sglang_version, patches, min_new_tokens]

- name: Enter the patch stage on every node when any differs
  sparkfleet.serving.converge_decide:
    stage: patches
    across: true
"""

RETURN = r"""
ansible_facts:
  description: The stage's entry in each of the three facts.
  returned: always
  type: dict
  contains:
    converge_digests:
      description: Stage to its digest (not set in a play without the probe).
      type: dict
    converge_reasons:
      description: Stage to why it runs on this node (empty when nothing differs).
      type: dict
    converge_run:
      description: Stage to whether it is entered on this node.
      type: dict
"""
