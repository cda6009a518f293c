#!/usr/bin/python
# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: roce_gid_info
short_description: Find the RoCE GID index of a data-plane IPv4 address
version_added: 0.1.0
author: sparkfleet maintainers (@sparkfleet)
description:
  - Reads the RoCE GID tables of every HCA and port from sysfs, the same files C(show_gids) reads
    (C(<sysfs_root>/<hca>/ports/<port>/gids/<index>), C(gid_attrs/types/<index>) and
    C(gid_attrs/ndevs/<index>)), and returns the index of the entry that carries O(address)
    with RoCE version O(roce_version).
  - The index differs from node to node (it depends on which addresses the NIC carried
    first), so it is discovered per host and never hard-coded. It is the value NCCL expects in
    E(NCCL_IB_GID_INDEX).
  - The IPv4-mapped GID must match the address exactly; link-local GIDs are never candidates.
  - Fails, naming the address, the HCAs searched and the IPv4 GIDs found, when no entry or more
    than one entry fits.
  - When the C(show_gids) command is installed and O(sysfs_root) is the default, also runs it and
    reports where its table differs from sysfs (see O(compare_show_gids)).
extends_documentation_fragment:
  - sparkfleet.serving.attributes
  - sparkfleet.serving.attributes.info_module
options:
  address:
    description:
      - The data-plane IPv4 address whose GID index is wanted (in the inventory, C(roce_ipv4)).
    type: str
    required: true
  roce_version:
    description:
      - The RoCE version of the entry to return. mlx5 lists every address twice, v1 then v2.
    type: int
    choices: [1, 2]
    default: 2
  hca:
    description:
      - Only consider this HCA (for example V(rocep1s0f0); in the inventory, C(roce_hca)).
      - Needed when the address has a GID on more than one HCA.
      - Unset or an empty string searches every HCA.
    type: str
  sysfs_root:
    description:
      - Directory holding one subdirectory per HCA, shaped like C(/sys/class/infiniband).
      - The cluster twin points this at its own tree (in the inventory, C(roce_sysfs_root)).
    type: path
    default: /sys/class/infiniband
  compare_show_gids:
    description:
      - When V(true), C(show_gids) is installed and O(sysfs_root) is the default, run C(show_gids),
        compare its table with the sysfs one and warn about every difference.
      - sysfs stays authoritative; a difference or an unusable C(show_gids) only warns.
      - Set to V(false) on hosts whose C(show_gids) prints a format this module does not parse.
    type: bool
    default: true
notes:
  - Like C(show_gids), the table leaves out the zero GID and the bare C(fe80::) prefix.
  - Unreadable C(gid_attrs) files (real sysfs answers EINVAL for empty slots) give an empty
    RV(gids[].version) or RV(gids[].netdev) instead of an error.
seealso:
  - name: Understanding show_gids script
    description: NVIDIA's description of the C(show_gids) columns.
    link: https://enterprise-support.nvidia.com/s/article/understanding-show-gids-script
"""

EXAMPLES = r"""
- name: Find the RoCE v2 GID index of the data-plane address
  sparkfleet.serving.roce_gid_info:
    address: "{{ roce_ipv4 }}"
    hca: "{{ roce_hca | default(omit) }}"
    sysfs_root: "{{ roce_sysfs_root | default('/sys/class/infiniband') }}"
  register: __roce_gid

- name: Record the GID index for the launch script
  ansible.builtin.set_fact:
    __roce_gid_index: "{{ __roce_gid.gid_index }}"

- name: Look up the RoCE v1 entry of one HCA without consulting show_gids
  sparkfleet.serving.roce_gid_info:
    address: 10.0.30.1
    roce_version: 1
    hca: rocep1s0f0
    compare_show_gids: false
"""

RETURN = r"""
gid_index:
  description: Index of the matching entry in the port's GID table (for E(NCCL_IB_GID_INDEX)).
  returned: success
  type: int
  sample: 7
hca:
  description: HCA that holds the matching entry (for E(NCCL_IB_HCA)).
  returned: success
  type: str
  sample: rocep1s0f0
port:
  description: Port number of the matching entry.
  returned: success
  type: int
  sample: 1
gid:
  description: The matching GID, 8 groups of 4 hex digits as sysfs prints it.
  returned: success
  type: str
  sample: "0000:0000:0000:0000:0000:ffff:0a00:1e01"
netdev:
  description: Network device the matching entry belongs to; empty when sysfs does not say.
  returned: success
  type: str
  sample: enp1s0f0np0
roce_version:
  description: RoCE version of the matching entry (the requested O(roce_version)).
  returned: success
  type: int
  sample: 2
gids:
  description:
    - Every non-empty GID of every HCA and port, as C(show_gids) prints them, sorted by HCA,
      then port and index numerically.
    - Also returned when the module fails to find a match, to help the diagnosis.
  returned: when the GID table could be read
  type: list
  elements: dict
  contains:
    hca:
      description: HCA name.
      type: str
      sample: rocep1s0f0
    port:
      description: Port number.
      type: int
      sample: 1
    index:
      description: GID index.
      type: int
      sample: 7
    gid:
      description: GID, 8 groups of 4 hex digits.
      type: str
      sample: "0000:0000:0000:0000:0000:ffff:0a00:1e01"
    ipv4:
      description: IPv4 address of an IPv4-mapped GID; empty string for any other GID.
      type: str
      sample: 10.0.30.1
    version:
      description: RoCE version as C(show_gids) prints it; empty when the type is unreadable.
      type: str
      sample: v2
    netdev:
      description: Network device of the GID; empty when unreadable.
      type: str
      sample: enp1s0f0np0
  sample:
    - {hca: rocep1s0f0, port: 1, index: 0, gid: "fe80:0000:0000:0000:5aa2:e1ff:fe4c:0a1e",
       ipv4: "", version: v1, netdev: enp1s0f0np0}
    - {hca: rocep1s0f0, port: 1, index: 7, gid: "0000:0000:0000:0000:0000:ffff:0a00:1e01",
       ipv4: 10.0.30.1, version: v2, netdev: enp1s0f0np0}
show_gids_checked:
  description: Whether C(show_gids) ran and its table was compared with sysfs.
  returned: when the GID table could be read
  type: bool
  sample: true
show_gids_disagreement:
  description:
    - One sentence per difference between the C(show_gids) table and the sysfs table
      (compared on GID, version and netdev per HCA, port and index); empty when they agree or
      when no comparison ran. Each difference is also issued as a warning.
  returned: when the GID table could be read
  type: list
  elements: str
  sample:
    - "rocep1s0f0 port 1 index 7: version is 'v2' in sysfs but 'v1' in show_gids"
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkfleet.serving.plugins.module_utils._gid import (
    GidError,
    compare,
    list_hcas,
    parse_show_gids,
    read_table,
    select,
    validate_ipv4,
)

DEFAULT_SYSFS_ROOT = "/sys/class/infiniband"


def _check_show_gids(module, rows, result):
    """Run show_gids, compare it with the sysfs rows and record the outcome in result."""
    show_gids = module.get_bin_path("show_gids", required=False)
    if not show_gids:
        return
    rc, out, err = module.run_command([show_gids], environ_update={"LANG": "C"})
    if rc != 0:
        module.warn(f"show_gids ({show_gids}) exited {rc}, not compared with sysfs: {err.strip()}")
        return
    try:
        listed = parse_show_gids(out)
    except GidError as exc:
        module.warn(f"{exc}; not compared with sysfs")
        return
    result["show_gids_checked"] = True
    result["show_gids_disagreement"] = compare(rows, listed)
    for difference in result["show_gids_disagreement"]:
        module.warn(f"show_gids disagrees with {DEFAULT_SYSFS_ROOT}: {difference}")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            address=dict(type="str", required=True),
            roce_version=dict(type="int", choices=[1, 2], default=2),
            hca=dict(type="str"),
            sysfs_root=dict(type="path", default=DEFAULT_SYSFS_ROOT),
            compare_show_gids=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    params = module.params
    root = params["sysfs_root"]
    hca = params["hca"] or None

    try:
        address = validate_ipv4(params["address"])
        hcas = list_hcas(root)
        rows = read_table(root)
    except GidError as exc:
        module.fail_json(msg=str(exc))

    result = dict(changed=False, gids=rows, show_gids_checked=False, show_gids_disagreement=[])
    if params["compare_show_gids"] and os.path.normpath(root) == DEFAULT_SYSFS_ROOT:
        _check_show_gids(module, rows, result)

    try:
        row = select(rows, address, params["roce_version"], hca=hca, hcas=hcas)
    except GidError as exc:
        module.fail_json(msg=str(exc), **result)

    result.update(
        gid_index=row["index"],
        hca=row["hca"],
        port=row["port"],
        gid=row["gid"],
        netdev=row["netdev"],
        roce_version=params["roce_version"],
    )
    module.exit_json(**result)


if __name__ == "__main__":
    main()
