#!/usr/bin/python
# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: cluster_info
short_description: Validate a cluster inventory and derive ranks and bring-up order
version_added: 0.1.0
author: sparkfleet maintainers (@sparkfleet)
description:
  - Reads, on the controller, the inventory values of every host of O(group) and checks
    them together, before anything on a node is touched. It never connects to a host.
  - "Checks: ranks are integers 0..N-1 with no gaps or duplicates and exactly one head;
    C(tp_size) x C(pp_size) uses every GPU of C(nnodes) nodes, and C(nnodes) is the node
    count; every management and data-plane address is a valid, unique IPv4 inside its
    declared subnet; NIC and HCA names are present; cluster-wide variables are equal on
    every host; API and rendezvous ports do not clash; the RoCE MTU is jumbo;
    speculative settings suit the model family (DeepSeek-V4 accepts only EAGLE or DSPARK)
    and the max-tokens clamp exceeds the draft window; image and revisions are fully
    pinned (a revision that is set is a 40-character commit, never a branch or tag);
    C(hf_endpoint) and C(model_weights_hf_endpoint) are http(s) URLs; C(data_dir) is
    absolute."
  - Every variable the inventory or extra vars give a host with one of the collection's
    prefixes (C(spark_), C(roce_), C(sglang_), C(model_weights_), C(watchdog_), C(canary_))
    must be declared in the collection's register of variables (C(meta/variables.yml), from
    which every role's C(meta/argument_specs.yml) is written); a misspelt one is refused
    with the closest declared name, not silently ignored.
  - Each problem names the host, the variable and the fix. An API listening beyond
    loopback without C(sglang_api_key) is reported as a warning.
  - The rendezvous address (C(--dist-init-addr)) is derived from rank 0's C(roce_ipv4),
    so it is rank 0's data-plane IP by construction; C(extra_args) may not override it.
extends_documentation_fragment:
  - sparkfleet.serving.attributes
  - sparkfleet.serving.attributes.info_module
  - sparkfleet.serving.attributes.controller
options:
  group:
    description: Inventory group holding the cluster's nodes.
    type: str
    default: spark_nodes
  engine:
    description:
      - The resolved engine profile, the C(sglang_engine) fact set by the
        C(sparkfleet.serving.sglang) role. Required unless O(nodes_only=true).
    type: dict
  nodes_only:
    description:
      - Only check that O(group) has hosts. A play on a group without hosts is skipped
        (C(no hosts matched)) and the run exits 0, so the first play of every playbook runs
        this on C(localhost) (C(sparkfleet.serving.nodes)).
      - Without hosts the message names the inventory sources given, the groups and hosts
        Ansible read from them, and any YAML or JSON source file that does not parse (Ansible
        only warns about it).
    type: bool
    default: false
  api_key_set:
    description: Whether C(sglang_api_key) is non-empty (the key itself is never passed here).
    type: bool
    default: false
  defaults:
    description:
      - Values for variables a host does not define, in place of the defaults the play has in
        scope (the canary checks its candidate profile this way).
      - Without an entry, such a variable takes the play's default (the role
        P(sparkfleet.serving.cluster#role), which every role of the collection depends on),
        templated with that host's own variables.
    type: dict
    default: {}
  fail_on_error:
    description: Fail when a problem is found. With V(false) the problems are only returned.
    type: bool
    default: true
notes:
  - Variables are read from C(hostvars), so every host of O(group) is checked even under C(--limit).
"""

EXAMPLES = r"""
- name: Refuse an inventory whose spark_nodes has no hosts (run on localhost)
  sparkfleet.serving.cluster_info:
    nodes_only: true

- name: Validate the inventory before touching any node
  sparkfleet.serving.cluster_info:
    engine: "{{ sglang_engine }}"
    api_key_set: "{{ sglang_api_key | length > 0 }}"
  run_once: true
  register: cluster
"""

RETURN = r"""
errors:
  description: "Every problem found, as C(<host>: <variable> <problem>; fix: <how>)."
  returned: always
  type: list
  elements: str
  sample:
    - "spark-3: spark_rank 1 is also the rank of spark-2; fix: ranks are unique; renumber 0..N-1"
warnings_found:
  description: Problems that do not stop a launch but that an operator must see.
  returned: always
  type: list
  elements: str
ranks:
  description: Host name to rank, for hosts with a usable rank.
  returned: always
  type: dict
  sample: {"spark-1": 0, "spark-2": 1}
head:
  description: The host of rank 0.
  returned: always
  type: str
  sample: spark-1
bring_up_order:
  description: Hosts in start order, workers from rank N-1 down to 1, then the head.
  returned: always
  type: list
  elements: str
  sample: [spark-4, spark-3, spark-2, spark-1]
nodes:
  description: The values read for each host.
  returned: when no problem was found, or with O(fail_on_error=false)
  type: list
  elements: dict
"""
