#!/usr/bin/python
# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: spark_node_info
short_description: Read what a Spark node holds in one call
version_added: 0.2.0
author: sparkfleet maintainers (@sparkfleet)
description:
  - Reads, in one module call, the state a sparkfleet stage compares with what it should be -
    the data-plane and management NICs (state, MTU, IPv4 addresses in their order), the RoCE
    GID row of the data-plane address (as M(sparkfleet.serving.roce_gid_info) selects it),
    managed paths (type, mode, owner, group, sha256 or link target), small JSON records the
    collection wrote, docker images and containers, and no-fragment pings to the peers' data-plane
    addresses (sent in parallel).
  - Read-only. An item that cannot be read is reported with an C(error) in its record; the
    module fails only on invalid options, so one missing NIC or file never hides the rest.
extends_documentation_fragment:
  - sparkfleet.serving.attributes
  - sparkfleet.serving.attributes.info_module
options:
  nics:
    description:
      - Network interface names to report (for example C(roce_iface) and C(spark_mgmt_iface)).
    type: list
    elements: str
    default: []
  gids:
    description:
      - GID rows to find, one per data-plane function (both halves of a 200G port); reported
        in RV(gids) in the same order. Empty skips the GID table.
    type: list
    elements: dict
    default: []
    suboptions:
      address:
        description: The data-plane IPv4 address (C(roce_ipv4)).
        type: str
        required: true
      hca:
        description: Only this HCA (C(roce_hca)); empty searches every HCA.
        type: str
      roce_version:
        description: RoCE version of the row.
        type: int
        choices: [1, 2]
        default: 2
      sysfs_root:
        description: GID table root (C(roce_sysfs_root)).
        type: path
        default: /sys/class/infiniband
  data_subnets:
    description:
      - The data-plane functions' NICs and subnets (C(iface), C(subnet)). A warning names every
        other NIC of the node that holds an address inside one of the subnets (its routes would
        compete with the data plane's).
    type: list
    elements: dict
    default: []
  paths:
    description:
      - Managed paths to report with their sha256 (regular files), mode, owner, group and link
        target.
    type: list
    elements: path
    default: []
  json_files:
    description:
      - Small JSON files whose parsed content is returned (records and manifests the collection
        writes).
    type: list
    elements: path
    default: []
  images:
    description:
      - Docker image references to look up (their local image id).
    type: list
    elements: str
    default: []
  containers:
    description:
      - Docker container names to look up (state, start time, image id).
    type: list
    elements: str
    default: []
  disk_free:
    description:
      - Paths whose filesystem's free space to report (a path that does not exist yet is measured
        at its nearest existing parent).
    type: list
    elements: path
    default: []
  stamps:
    description:
      - Converge stamps of the collection's stages (JSON files a stage writes once it ran). Each is
        returned parsed, with the current state of every path it records, so the controller sees
        in this one call whether a stage has anything to do.
    type: list
    elements: path
    default: []
  weights:
    description:
      - Staged weight revisions to quick-verify, as the entries of C(model_weights_plan)'s C(stage)
        list (C(repo) and C(commit) are read, other keys ignored). Files whose stat changed since
        their last verification are hashed again (see M(sparkfleet.serving.model_weights_store)).
    type: list
    elements: dict
    default: []
  weights_store:
    description: The weights store of those revisions (C(model_weights_plan)'s C(store)).
    type: path
  peers:
    description:
      - Data-plane addresses to ping with the don't-fragment bit set, all at once.
    type: list
    elements: str
    default: []
  ping_size:
    description:
      - Payload bytes of each ping; V(0) means the size that fills O(mtu) (C(mtu - 28)).
    type: int
    default: 0
  mtu:
    description:
      - The MTU the pings must pass (C(roce_mtu)); used when O(ping_size=0).
    type: int
    default: 9000
  ping_count:
    description:
      - Pings sent to each peer (0.2 s apart); every one must be answered.
    type: int
    default: 1
  ping_timeout:
    description:
      - Seconds each ping waits for its answer.
    type: int
    default: 2
  netplan:
    description:
      - The profiles netplan generates for one port from the node's netplan files (in a scratch
        root; the node's own generated configuration is not touched), with the files that
        define each and its MTU. Omit to skip; a node without netplan reports an C(error).
    type: dict
    suboptions:
      ifaces:
        description: The ports (every data-plane function's C(iface)).
        type: list
        elements: str
        required: true
      dir:
        description: The node's netplan directory.
        type: path
        default: /etc/netplan
      files:
        description:
          - File name to YAML text, added to (or replacing) the directory's files first - a file
            about to be written, so its effect is known before it is.
        type: dict
        default: {}
  host:
    description:
      - What the engine needs on the node, read for the host checks (role C(preflight)) in the same
        call - the docker daemon and its runtimes, CDI specs for the GPUs, devices, the host paths
        the profile mounts, the engine image, the memory available and the memory the running rank
        holds. Omit to skip.
    type: dict
    suboptions:
      image:
        description: The engine image whose local id to report.
        type: str
      container:
        description: The rank's container; when it runs, the memory it holds is reported.
        type: str
      devices:
        description: Device paths to report as C(present) or C(missing).
        type: list
        elements: path
        default: []
      paths:
        description:
          - Host paths to report as C(dir), C(file), C(other) or C(missing) (links followed).
        type: list
        elements: path
        default: []
      cdi_dirs:
        description: Directories of CDI spec files; those naming C(nvidia.com/gpu) are reported.
        type: list
        elements: path
        default: [/etc/cdi, /var/run/cdi]
      meminfo:
        description: The file whose C(MemAvailable) is reported.
        type: path
        default: /proc/meminfo
      programs:
        description: Programs (names looked up on the PATH and in the sbin directories, or absolute
          paths) to report as C(present) or C(missing).
        type: list
        elements: str
        default: []
      processes:
        description: Process names (as in C(/proc/<pid>/comm)) to report as running or not.
        type: list
        elements: str
        default: []
      hcas:
        description:
          - HCAs whose verbs devices (C(/dev/infiniband/uverbs<N>), listed by the kernel under
            O(host.ib_sysfs_root)) to report - the devices an RDMA process in the container opens.
        type: list
        elements: str
        default: []
      ib_sysfs_root:
        description: Where the HCAs are listed (C(roce_sysfs_root)).
        type: path
        default: /sys/class/infiniband
      sshd_user:
        description: The user whose login sshd's effective settings (C(sshd -T)) are read for; empty
          skips the reading.
        type: str
        default: ""
      sshd_addr:
        description: The address that user connects from (sshd's C(Match Address) blocks).
        type: str
        default: 127.0.0.1
notes:
  - Docker is asked once for all images and once for all containers; a node without docker
    reports every image and container with an C(error).
seealso:
  - module: sparkfleet.serving.roce_gid_info
"""

EXAMPLES = r"""
- name: Read the node's state in one call
  sparkfleet.serving.spark_node_info:
    nics: ["{{ roce_iface }}", "{{ spark_mgmt_iface }}"]
    gids:
      - address: "{{ roce_ipv4 }}"
        hca: "{{ roce_hca }}"
        sysfs_root: "{{ roce_sysfs_root }}"
    paths:
      - /usr/local/sbin/sparkfleet-sglang
    json_files:
      - /var/lib/sparkfleet/converge/roce.json
    containers: ["{{ sglang_engine.container_name }}"]
    peers: "{{ groups['spark_nodes'] | difference([inventory_hostname])
               | map('extract', hostvars, 'roce_ipv4') | list }}"
    mtu: "{{ roce_mtu }}"
  register: __node
"""

RETURN = r"""
nics:
  description: Per NIC name, C(exists), C(operstate), C(mtu), C(ipv4) (CIDR, in order), C(carrier).
  returned: always
  type: dict
  sample:
    enp1s0f0np0: {exists: true, operstate: up, mtu: 9000, ipv4: [10.0.30.1/24], carrier: 1}
gids:
  description:
    - The rows of O(gids), in order, each with C(found), and C(index), C(hca), C(port), C(gid),
      C(netdev) or C(error).
  returned: always
  type: list
  elements: dict
  sample:
    - found: true
      index: 3
      hca: rocep1s0f0
      port: 1
      gid: "0000:0000:0000:0000:0000:ffff:0a00:1e01"
      netdev: enp1s0f0np0
paths:
  description: Per path, C(exists), C(type), C(mode), C(owner), C(group), C(sha256) or C(target).
  returned: always
  type: dict
  sample:
    /usr/local/sbin/sparkfleet-sglang:
      exists: true
      type: file
      mode: "0755"
      owner: root
      group: root
      size: 5120
      sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
json_files:
  description: Per path, C(exists) and C(content), or C(error).
  returned: always
  type: dict
images:
  description: Per reference, C(exists) and C(id).
  returned: always
  type: dict
containers:
  description:
    - Per name, C(exists), C(status), C(running), C(started_at), C(image), C(exit_code), C(labels)
      (the C(sparkfleet.*) ones).
  returned: always
  type: dict
disk_free:
  description:
    - Per path, C(at) (the existing path measured) and C(free_bytes) (as C(df)'s Available), or
      C(error).
  returned: always
  type: dict
  sample:
    /home/tiger/models: {at: /home/tiger, free_bytes: 512000000000}
stamps:
  description:
    - Per stamp path, C(exists) and C(content) (or C(error)), and C(actual), the state of every path
      the stamp records (as in RV(paths)).
  returned: always
  type: dict
weights:
  description:
    - Per C(repo@commit), C(state) (C(present), C(missing) or C(bad)) and C(bad) (the files that
      no longer verify).
  returned: always
  type: dict
host:
  description:
    - When O(host) is given - C(docker) (C(ok), C(version) or C(error)), C(runtimes), C(cdi) (spec
      files), C(devices) and C(paths) (per path, as in O(host)), C(image_id) (empty when the
      image is absent; C(image_error) when docker could not say), C(mem_available) and
      C(mem_held) (bytes), C(programs) (C(present) or C(missing) per program), C(processes)
      (true when one runs, per name), C(uverbs) (per HCA of O(host.hcas), its verbs C(devices) and
      those C(missing) under C(/dev/infiniband), or C(error)) and, with O(host.sshd_user), C(sshd)
      (C(ok) and the C(settings) that decide a key login, or C(error)).
  returned: when O(host) is given
  type: dict
  sample:
    docker: {ok: true, version: 28.2.2}
    runtimes: [nvidia, runc]
    cdi: []
    devices: {/dev/infiniband: present}
    paths: {/home/tiger/models/RadixArk/Qwen3.8-27B-NVFP4-BF16-LMHead: dir}
    image_id: "sha256:0f3c..."
    mem_available: 118111600640
    mem_held: 0
netplan:
  description:
    - C(ports) (per port of O(netplan.ifaces), its profiles, each C(id), C(renderer), C(path) of
      the generated file, C(mtu) and C(files), the netplan files that define it), C(error) and
      C(networkmanager) (true when a NetworkManager process runs).
  returned: when O(netplan) is given
  type: dict
  sample:
    ports:
      enp1s0f0np0:
        - id: enp1s0f0np0
          renderer: NetworkManager
          mtu: 9000
          files: [/etc/netplan/60-sparkfleet-roce.yaml]
          path: run/NetworkManager/system-connections/netplan-enp1s0f0np0.nmconnection
    error: null
    networkmanager: true
peers:
  description: Per address, C(ok), C(size), C(rtt_ms) or C(error).
  returned: always
  type: dict
  sample:
    10.0.30.2: {ok: true, size: 8972, rtt_ms: 0.071}
elapsed_s:
  description: Seconds the module took on the node.
  returned: always
  type: float
"""

import concurrent.futures
import os
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkfleet.serving.plugins.module_utils._converge import mem_available
from ansible_collections.sparkfleet.serving.plugins.module_utils._engine import size_bytes
from ansible_collections.sparkfleet.serving.plugins.module_utils._netplan import port_profiles
from ansible_collections.sparkfleet.serving.plugins.module_utils._node_state import (
    PING_OVERHEAD,
    cdi_specs,
    disk_record,
    docker_info_record,
    docker_records,
    gid_record,
    json_record,
    nic_records,
    path_kind,
    path_record,
    ping_argv,
    ping_record,
    running_processes,
    sshd_record,
    subnet_intruders,
    uverbs_record,
    weights_record,
)

LANG_C = {"LANG": "C", "LC_ALL": "C"}


def _nics(module, names, data_subnets=()):
    if not names:
        return {}
    ip = module.get_bin_path("ip")
    if not ip:
        return {name: {"exists": None, "error": "ip (iproute2) is not installed"} for name in names}
    rc, out, err = module.run_command([ip, "-j", "addr", "show"], environ_update=LANG_C)
    if rc != 0:
        return {
            name: {"exists": None, "error": f"ip -j addr show: {err.strip()}"} for name in names
        }
    for warning in subnet_intruders(out, data_subnets):
        module.warn(warning)
    return nic_records(out, names)


def _docker(module, kind, names):
    if not names:
        return {}
    docker = module.get_bin_path("docker")
    if not docker:
        return {name: {"exists": None, "error": "docker is not installed"} for name in names}
    rc, out, err = module.run_command([docker, kind, "inspect", *names], environ_update=LANG_C)
    if rc != 0 and not out.strip().startswith("["):
        return {
            name: {"exists": None, "error": f"docker {kind} inspect: {err.strip()}"}
            for name in names
        }
    return docker_records(out, names, kind)


def _program(module, name):
    """The program's path when it is installed (an absolute path: executable there), else None."""
    if os.path.isabs(name):
        return name if os.path.isfile(name) and os.access(name, os.X_OK) else None
    return module.get_bin_path(name, opt_dirs=["/usr/sbin", "/sbin", "/usr/local/sbin"])


def _host(module, spec):
    """What the engine needs on this node (the host checks), in the shape host_problems reads."""
    out = {
        "cdi": cdi_specs(spec["cdi_dirs"]),
        "devices": {d: "present" if os.path.exists(d) else "missing" for d in spec["devices"]},
        "paths": {p: path_kind(p) for p in spec["paths"]},
        "mem_available": mem_available(spec["meminfo"]),
        "mem_held": 0,
        "runtimes": [],
        "image_id": "",
        "programs": {
            name: "present" if _program(module, name) else "missing" for name in spec["programs"]
        },
        "processes": running_processes(spec["processes"]),
        "uverbs": {hca: uverbs_record(spec["ib_sysfs_root"], hca) for hca in spec["hcas"]},
    }
    if spec["sshd_user"]:
        sshd = _program(module, "sshd")
        if not sshd:
            out["sshd"] = {"ok": False, "error": "sshd is not installed"}
        else:
            rc, text, err = module.run_command(
                [
                    sshd,
                    "-T",
                    "-C",
                    f"user={spec['sshd_user']},host=localhost,addr={spec['sshd_addr']}",
                ],
                environ_update=LANG_C,
            )
            out["sshd"] = sshd_record(rc, text, err)
    docker = module.get_bin_path("docker")
    if not docker:
        out["docker"] = {"ok": False, "error": "docker is not installed"}
        return out
    rc, info, err = module.run_command(
        [docker, "info", "--format", "{{json .}}"], environ_update=LANG_C
    )
    out["docker"] = docker_info_record(rc, info, err)
    if not out["docker"]["ok"]:
        return out
    out["runtimes"] = out["docker"].pop("runtimes")
    if spec["image"]:
        image = _docker(module, "image", [spec["image"]])[spec["image"]]
        out["image_id"] = image.get("id") or ""
        if image.get("error"):
            out["image_error"] = image["error"]
    if spec["container"]:
        rank = _docker(module, "container", [spec["container"]])[spec["container"]]
        if rank.get("running"):
            # What the running rank holds is freed by the restart this run may make.
            rc, usage, err = module.run_command(
                [docker, "stats", "--no-stream", "--format", "{{.MemUsage}}", spec["container"]],
                environ_update=LANG_C,
            )
            try:
                out["mem_held"] = size_bytes(usage.split("/")[0]) if rc == 0 else 0
            except ValueError:
                out["mem_held"] = 0
    return out


def _stamps(paths):
    out = {}
    for path in paths:
        record = json_record(path)
        content = record.get("content")
        recorded = content.get("paths") if isinstance(content, dict) else None
        record["actual"] = {p: path_record(p) for p in (recorded or {})}
        out[path] = record
    return out


def _pings(module, peers, size, timeout, count=1):
    if not peers:
        return {}
    ping = module.get_bin_path("ping")
    if not ping:
        return {
            peer: {"ok": False, "size": size, "error": "ping is not installed"} for peer in peers
        }

    def one(peer):
        rc, out, err = module.run_command(
            ping_argv(ping, peer, size, timeout, count), environ_update=LANG_C
        )
        return ping_record(rc, out, err, size)

    with concurrent.futures.ThreadPoolExecutor(max_workers=min(16, len(peers))) as pool:
        return dict(zip(peers, pool.map(one, peers)))


def _netplan(module, spec):
    # NetworkManager running decides the renderer the roce role's file states (auto).
    running = running_processes(["NetworkManager"])["NetworkManager"]
    if not os.path.isdir(spec["dir"]):
        # A host without netplan: nothing competes for the ports.
        return {"ports": {}, "error": None, "networkmanager": running}
    netplan = module.get_bin_path("netplan")
    if not netplan:
        return {"ports": {}, "error": "netplan is not installed", "networkmanager": running}
    files = {str(name): str(text) for name, text in (spec["files"] or {}).items()}
    return dict(port_profiles(spec["ifaces"], spec["dir"], files, netplan), networkmanager=running)


def _check_options(module, p):
    """Fail on the options the argument spec cannot refuse; the size of the pings' payload."""
    size = p["ping_size"] or p["mtu"] - PING_OVERHEAD
    if size <= 0:
        module.fail_json(
            msg=f"ping size {size} is not positive: give mtu > {PING_OVERHEAD} or ping_size"
        )
    if any(not isinstance(g, dict) or not g.get("address") for g in p["gids"]):
        module.fail_json(msg="each gids entry needs address (and hca, roce_version, sysfs_root)")
    if p["weights"] and not p["weights_store"]:
        module.fail_json(msg="weights needs weights_store")
    if any(
        not isinstance(w, dict)
        or not isinstance(w.get("repo"), str)
        or not isinstance(w.get("commit"), str)
        for w in p["weights"]
    ):
        module.fail_json(msg="each weights entry needs repo and commit (strings)")
    return size


def _read_files(p):
    """What the files say: managed paths, JSON records, free space, stamps and weights."""
    return dict(
        paths={path: path_record(path) for path in p["paths"]},
        json_files={path: json_record(path) for path in p["json_files"]},
        disk_free={path: disk_record(path) for path in p["disk_free"]},
        stamps=_stamps(p["stamps"]),
        weights={
            f"{w['repo']}@{w['commit']}": weights_record(p["weights_store"], w["repo"], w["commit"])
            for w in p["weights"]
        },
    )


def _collect(module, p, size):
    """Read every item asked for, the commands side by side with the files; the result."""
    start = time.monotonic()
    # The commands (ip, docker, the pings) wait on other processes: they run side by side
    # while this one reads the files.
    with concurrent.futures.ThreadPoolExecutor(max_workers=5) as pool:
        nics = pool.submit(_nics, module, p["nics"], p["data_subnets"])
        images = pool.submit(_docker, module, "image", p["images"])
        containers = pool.submit(_docker, module, "container", p["containers"])
        peers = pool.submit(_pings, module, p["peers"], size, p["ping_timeout"], p["ping_count"])
        host = pool.submit(_host, module, p["host"]) if p["host"] else None
        netplan = pool.submit(_netplan, module, p["netplan"]) if p["netplan"] else None
        result = dict(changed=False, **_read_files(p))
        result.update(
            nics=nics.result(),
            images=images.result(),
            containers=containers.result(),
            peers=peers.result(),
        )
        if host is not None:
            result["host"] = host.result()
        if netplan is not None:
            result["netplan"] = netplan.result()
    result["gids"] = [
        gid_record(g["sysfs_root"], g["address"], g["roce_version"], g["hca"] or None)
        for g in p["gids"]
    ]
    result["elapsed_s"] = round(time.monotonic() - start, 3)
    return result


def main():
    """Read everything asked for on this node, in one call."""
    module = AnsibleModule(
        argument_spec=dict(
            nics=dict(type="list", elements="str", default=[]),
            gids=dict(
                type="list",
                elements="dict",
                default=[],
                options=dict(
                    address=dict(type="str", required=True),
                    hca=dict(type="str"),
                    roce_version=dict(type="int", choices=[1, 2], default=2),
                    sysfs_root=dict(type="path", default="/sys/class/infiniband"),
                ),
            ),
            data_subnets=dict(type="list", elements="dict", default=[]),
            paths=dict(type="list", elements="path", default=[]),
            json_files=dict(type="list", elements="path", default=[]),
            images=dict(type="list", elements="str", default=[]),
            containers=dict(type="list", elements="str", default=[]),
            disk_free=dict(type="list", elements="path", default=[]),
            stamps=dict(type="list", elements="path", default=[]),
            weights=dict(type="list", elements="dict", default=[]),
            weights_store=dict(type="path"),
            peers=dict(type="list", elements="str", default=[]),
            ping_size=dict(type="int", default=0),
            mtu=dict(type="int", default=9000),
            ping_count=dict(type="int", default=1),
            ping_timeout=dict(type="int", default=2),
            netplan=dict(
                type="dict",
                options=dict(
                    ifaces=dict(type="list", elements="str", required=True),
                    dir=dict(type="path", default="/etc/netplan"),
                    files=dict(type="dict", default={}),
                ),
            ),
            host=dict(
                type="dict",
                options=dict(
                    image=dict(type="str"),
                    container=dict(type="str"),
                    devices=dict(type="list", elements="path", default=[]),
                    paths=dict(type="list", elements="path", default=[]),
                    cdi_dirs=dict(
                        type="list", elements="path", default=["/etc/cdi", "/var/run/cdi"]
                    ),
                    meminfo=dict(type="path", default="/proc/meminfo"),
                    programs=dict(type="list", elements="str", default=[]),
                    processes=dict(type="list", elements="str", default=[]),
                    hcas=dict(type="list", elements="str", default=[]),
                    ib_sysfs_root=dict(type="path", default="/sys/class/infiniband"),
                    sshd_user=dict(type="str", default=""),
                    sshd_addr=dict(type="str", default="127.0.0.1"),
                ),
            ),
        ),
        supports_check_mode=True,
    )
    p = module.params
    size = _check_options(module, p)
    module.exit_json(**_collect(module, p, size))


if __name__ == "__main__":
    main()
