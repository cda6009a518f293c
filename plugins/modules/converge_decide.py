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
    specs of its role entry points declare, the cluster's nodes from C(preflight_cluster), the
    roles' files and the collection's plugins) and compares it, with every path the stage
    recorded, against the stamp the converge probe read (C(converge_node), role
    P(sparkfleet.serving.converge#role)). Adds the stage's live check of the probe's reading
    (the data plane's NIC, MTU, address, GID row and jumbo pings; the staged weights; the engine
    image's id) and the caller's O(live) reasons. It never connects to a host.
  - "Each stage's entry points, the profile fields it reads and its live check are declared once,
    in the action (C(roce): C(roce:main); C(weights): C(model_weights:main); C(patches):
    C(sglang_patches:main); C(launch): C(sglang_node:main); C(control): C(watchdog:control);
    C(watchdog): C(watchdog:main))."
  - Sets the facts C(converge_digests), C(converge_reasons) and C(converge_run) (each keyed by
    stage). A stage is entered when something differs, when C(converge_skip) is off, or in a
    play without the probe (nothing is recorded there).
  - A stage that acts across nodes (the weights fan-out, the patches, the control path) runs
    on every node when any differs; a second call with O(across=true), after every node made
    its own, decides that.
  - O(stage=all) decides every stage at once, before any ran, and sets C(converge_quiet) when
    nothing differs on this node - no stage's digest, recorded path or live check, the rank runs
    the configuration its launch recorded, no restart is asked for
    (C(sglang_node_force_restart)). The facts a later stage reads from an earlier one (the
    launch reads C(roce_node) and C(sglang_patches_node)) are taken as recorded, which is what
    an earlier stage that is not entered publishes.
extends_documentation_fragment:
  - sparkfleet.serving.attributes
  - sparkfleet.serving.attributes.info_module
  - sparkfleet.serving.attributes.controller
options:
  stage:
    description:
      - The stage (its stamp is C(<converge_dir>/<stage>.json) on each node), or V(all).
    type: str
    required: true
    choices: [roce, weights, patches, launch, control, watchdog, all]
  live:
    description: More reasons from the caller's own checks.
    type: list
    elements: str
    default: []
  across:
    description: Enter the stage on every node of the play when any of them has a reason.
    type: bool
    default: false
notes:
  - Reads C(converge_node), C(converge_recorded), C(converge_dir), C(converge_skip),
    C(preflight_cluster) and the options it digests from the play's variables.
"""

EXAMPLES = r"""
- name: Compare the data plane with what the node holds
  sparkfleet.serving.converge_decide:
    stage: roce

- name: Compare the patched files with what the nodes hold
  sparkfleet.serving.converge_decide:
    stage: patches

- name: Enter the patch stage on every node when any differs
  sparkfleet.serving.converge_decide:
    stage: patches
    across: true

- name: Decide every stage at once (a run with nothing to do ends after it)
  sparkfleet.serving.converge_decide:
    stage: all
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
    converge_quiet:
      description: With O(stage=all) (and only then), whether nothing differs on this node.
      type: bool
reasons:
  description: With O(stage=all), stage (or C(bringup)) to why it differs on this node.
  returned: when O(stage=all)
  type: dict
"""
