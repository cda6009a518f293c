# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Turn an engine profile (data) into the launch command of one node.

Pure functions, no Ansible imports: used by the filter plugins that render the
per-node launch script, and unit-tested against the seed recipes.
"""

from __future__ import annotations

import fnmatch
import ipaddress

from ansible_collections.sparkfleet.serving.plugins.module_utils._converge import memory_problem
from ansible_collections.sparkfleet.serving.plugins.module_utils._profile_schema import (
    defaults,
    server_flags,
)

# Python that runs SGLang's entry with an API key taken from the environment, so
# the key is never on a command line (ps shows those to every user).
API_KEY_SHIM = (
    "import os, runpy, sys; "
    "sys.argv[1:1] = ['--api-key', os.environ.pop('SGLANG_API_KEY')]; "
    "runpy.run_module('sglang.launch_server', run_name='__main__', alter_sys=True)"
)


def python_command(profile, api_key_set=False):
    """The interpreter part of the engine command.

    ``--check-hash-based-pycs always`` makes the server process re-validate
    hash-based bytecode against the mounted (patched) sources. With an API key the
    entry is the shim above, so the key never appears on a command line.
    """
    command = [str(profile.get("python") or "python3"), "--check-hash-based-pycs", "always"]
    if api_key_set:
        return [*command, "-c", API_KEY_SHIM]
    return [*command, "-m", "sglang.launch_server"]


def _lookup(profile, dotted):
    value = profile
    for part in dotted.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def _number(value):
    # 0.5 is written 0.50 as operators write memory fractions; finer ones stay exact.
    if isinstance(value, float):
        return f"{value:.2f}" if round(value, 2) == value else repr(value)
    return str(value)


def rank_container(container_name, rank):
    """The engine container of one rank: the profile's container name and the rank
    (``<name>-r<rank>``), the name every node's launcher, the probe and the drills use."""
    return f"{container_name}-r{int(rank)}"


def dist_init_addr(head_ipv4, port):
    """host:port where ranks meet (rank 0's data-plane address)."""
    return f"{head_ipv4}:{int(port)}"


def speculative_window(profile):
    """Tokens a speculative step may take at once (0 when speculation is off).

    A request asking for no more than this wedges some speculative paths (seed
    Pitfall 3: DFlash2 with 8 draft tokens), which is what the clamp guards.
    """
    spec = profile.get("speculative") or {}
    if not spec.get("algorithm"):
        return 0
    candidates = [spec.get("num_draft_tokens"), spec.get("dspark_block_size")]
    if spec.get("num_steps"):
        candidates.append(int(spec["num_steps"]) + 1)
    return max([int(c) for c in candidates if c] or [0])


def server_args(profile, node_rank, head_ipv4):
    """SGLang launch_server flags for one rank, in the seed's order."""
    values = dict(profile)
    values["__node_rank"] = int(node_rank)
    values["__dist_init_addr"] = (
        dist_init_addr(head_ipv4, profile.get("dist_init_port") or defaults()["dist_init_port"])
        if int(profile.get("nnodes") or 1) > 1
        else None
    )
    args = []
    # (field, flag) in the seed's order, from the profile schema. Booleans are switches;
    # None/False/"" leave the flag out.
    for field, flag in server_flags():
        value = _lookup(values, field) if "." in field else values.get(field)
        if value is None or value is False or value == "":
            continue
        if value is True:
            args.append(flag)
        elif isinstance(value, (int, float)):
            args += [flag, _number(value)]
        else:
            args += [flag, str(value)]
    args += [str(a) for a in profile.get("extra_args") or []]
    return args


def container_args(profile):
    """docker run options of the profile's container section, mounts excepted."""
    container = profile.get("container") or {}
    args = []
    if container.get("gpus"):
        args += ["--gpus", str(container["gpus"])]
    for key, flag in (
        ("memory", "--memory"),
        ("memory_swap", "--memory-swap"),
        ("shm_size", "--shm-size"),
    ):
        if container.get(key):
            args += [flag, str(container[key])]
    args += ["--network", str(container.get("network") or "host")]
    if container.get("ipc"):
        args.append(f"--ipc={container['ipc']}")
    for cap in container.get("cap_add") or []:
        args += ["--cap-add", str(cap)]
    for limit in container.get("ulimits") or []:
        args += ["--ulimit", str(limit)]
    for device in container.get("devices") or []:
        args += ["--device", str(device)]
    return args


def container_volumes(profile):
    """The profile's ``-v`` mounts (weights, caches, chat template)."""
    args = []
    for volume in (profile.get("container") or {}).get("volumes") or []:
        args += ["-v", str(volume)]
    return args


def roce_functions(hcas, hca, iface, ipv4, subnet):
    """The node's data-plane functions: ``roce_hcas`` when set (every function, the first the
    port's primary one), else the one that roce_hca/roce_iface/roce_ipv4/roce_subnet name.

    Each: ``hca``, ``iface``, ``ipv4``, ``subnet`` (strings). A 200G ConnectX-7 port shows up
    as two PCIe functions, each with its own netdev, HCA, subnet and GID table; NCCL needs
    both in NCCL_IB_HCA for the port's full bandwidth.
    """
    if hcas:
        return [
            {key: str(entry.get(key, "")) for key in ("hca", "iface", "ipv4", "subnet")}
            for entry in hcas
        ]
    return [{"hca": str(hca), "iface": str(iface), "ipv4": str(ipv4), "subnet": str(subnet)}]


def addr_range(subnets):
    """NCCL_IB_ADDR_RANGE for the data-plane subnets: the one subnet, or the smallest network
    holding them all (NCCL takes one range; the functions' subnets are adjacent on a rack)."""
    nets = [ipaddress.IPv4Network(str(s), strict=False) for s in subnets]
    if not nets:
        raise ValueError("no data-plane subnet")
    covering = nets[0]
    while not all(n.subnet_of(covering) for n in nets):
        covering = covering.supernet()
    return str(covering)


def nccl_env(head_ipv4, master_port, socket_ifname, hca, subnet, roce_version=2):
    """NCCL environment for one rank.

    ``hca`` and ``subnet``: one HCA and its subnet, or the lists of every function's
    (NCCL_IB_HCA lists them all, NCCL_IB_ADDR_RANGE covers their subnets). No
    NCCL_IB_GID_INDEX: with gid_mode ``discover`` the launcher reads the GID tables at every
    start and passes the index it finds (see rank_config); with ``auto`` NCCL picks the
    RoCE v2 GID inside NCCL_IB_ADDR_RANGE.
    """
    hcas = [hca] if isinstance(hca, str) else list(hca)
    subnets = [subnet] if isinstance(subnet, str) else list(subnet)
    return {
        "NCCL_SOCKET_IFNAME": socket_ifname,
        "NCCL_IB_HCA": ",".join(str(h) for h in hcas),
        "NCCL_IB_ROCE_VERSION_NUM": str(int(roce_version)),
        "NCCL_IB_ADDR_RANGE": addr_range(subnets),
        "MASTER_ADDR": head_ipv4,
        "MASTER_PORT": str(int(master_port)),
    }


_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "k": 1024,
    "kb": 1024,
    "kib": 1024,
    "m": 1024**2,
    "mb": 1024**2,
    "mib": 1024**2,
    "g": 1024**3,
    "gb": 1024**3,
    "gib": 1024**3,
    "t": 1024**4,
    "tb": 1024**4,
    "tib": 1024**4,
}


def size_bytes(value):
    """Bytes of a docker size (``100g``, ``512m``) or of ``docker stats`` (``1.5GiB``)."""
    text = str(value).strip().lower()
    number = text.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = text[len(number) :]
    if not number or unit not in _SIZE_UNITS:
        raise ValueError(f"{value!r} is not a size (e.g. 100g, 512m)")
    return int(float(number) * _SIZE_UNITS[unit])


def _mount_spec(volume):
    parts = str(volume).split(":")
    if len(parts) < 2:
        return None
    return parts[0], parts[1]


def host_path(profile, container_path):
    """Where ``container_path`` lives on the node, through the profile's mounts.

    None when no mount covers it (the path is inside the image).
    """
    best = None
    for volume in (profile.get("container") or {}).get("volumes") or []:
        spec = _mount_spec(volume)
        if spec is None:
            continue
        src, dest = spec
        dest = dest.rstrip("/") or "/"
        covers = container_path == dest or container_path.startswith(dest.rstrip("/") + "/")
        if covers and (best is None or len(dest) > len(best[1])):
            best = (src, dest)
    if best is None:
        return None
    src, dest = best
    rest = container_path[len(dest) :].lstrip("/")
    return src.rstrip("/") + ("/" + rest if rest else "")


# Where the engine looks for hub repos (the image's HOME cache); the weights stage puts
# the speculative draft there (plugins/module_utils/_weights.py, HF_HOME_IN_CONTAINER).
HF_HUB_IN_CONTAINER = "/root/.cache/huggingface/hub"


def offline_draft_path(profile):
    """Container path of the speculative draft's snapshot in the Hugging Face cache, when the
    draft is a hub repo id pinned to a revision (the engine resolves it there with
    HF_HUB_OFFLINE=1); None otherwise."""
    spec = profile.get("speculative") or {}
    draft, revision = spec.get("draft_model_path"), spec.get("draft_model_revision")
    if not draft or str(draft).startswith(("/", ".", "~")) or not revision:
        return None
    name = "models--" + str(draft).replace("/", "--")
    return f"{HF_HUB_IN_CONTAINER}/{name}/snapshots/{revision}"


def host_requirements(profile, offline=False):
    """What a node must hold before the engine can start, from the profile.

    Returns a dict: ``gpus`` (the --gpus value or None), ``devices`` (host device
    paths), ``paths`` (``[{what, path, kind}]``: files and directories the profile
    mounts into the container), ``memory`` (bytes of the container limit or 0).
    ``offline``: the engine boots with HF_HUB_OFFLINE=1, so a hub-id draft must already
    be in the mounted Hugging Face cache at its pinned revision.
    """
    container = profile.get("container") or {}
    paths = []
    for what, field, kind in (
        ("chat template", "chat_template", "file"),
        ("model directory", "model_path", "dir"),
    ):
        value = profile.get(field)
        if value and str(value).startswith("/"):
            on_host = host_path(profile, str(value))
            if on_host:
                paths.append(
                    {"what": f"{what} ({field})", "path": on_host, "kind": kind, "container": value}
                )
    draft = offline_draft_path(profile) if offline else None
    spec = profile.get("speculative") or {}
    if draft:
        on_host = host_path(profile, draft)
        if on_host:
            paths.append(
                {
                    "what": "speculative draft (speculative.draft_model_path at "
                    "draft_model_revision, in the Hugging Face cache)",
                    "path": on_host,
                    "kind": "dir",
                    "container": draft,
                    "fix": f"download it on the node (HF_HOME={on_host.split('/hub/')[0]} hf "
                    f"download {spec['draft_model_path']} --revision "
                    f"{spec['draft_model_revision']}), let the weights stage fetch it "
                    "(model_weights_enabled), or boot online (sglang_node_hf_offline: false)",
                }
            )
    devices = []
    for device in container.get("devices") or []:
        devices.append(str(device).split(":", 1)[0])
    memory = container.get("memory")
    gpus = container.get("gpus") or None
    return {
        "gpus": gpus,
        "devices": devices,
        # --gpus is served by the NVIDIA runtime or its prestart hook, not by a CDI spec.
        "programs": [GPU_HOOK] if gpus else [],
        # RDMA in the container opens the data-plane HCA's verbs device under /dev/infiniband.
        "verbs": any(d == "/dev/infiniband" or d.startswith("/dev/infiniband/") for d in devices),
        "paths": paths,
        "memory": size_bytes(memory) if memory else 0,
    }


# What `docker run --gpus` calls when docker has no "nvidia" runtime (nvidia-container-toolkit).
GPU_HOOK = "nvidia-container-runtime-hook"


def sshd_key_login_problem(user, record):
    """Why sshd (its effective settings, ``sshd -T``) would refuse ``user``'s key, or None."""
    if not isinstance(record, dict) or not record.get("ok"):
        why = (record or {}).get("error") if isinstance(record, dict) else None
        return f"sshd's settings could not be read ({why or 'not read'})"
    settings = record.get("settings") or {}
    if settings.get("pubkeyauthentication", "yes") != "yes":
        return "sshd has PubkeyAuthentication no"
    root_login = settings.get("permitrootlogin", "prohibit-password")
    if user == "root" and root_login not in ("yes", "prohibit-password", "without-password"):
        return f"sshd has PermitRootLogin {root_login}"
    users = [p.split("@", 1)[0] for p in settings.get("denyusers", "").split()]
    if any(fnmatch.fnmatchcase(user, p) for p in users):
        return f"sshd's DenyUsers matches {user}"
    users = [p.split("@", 1)[0] for p in settings.get("allowusers", "").split()]
    if users and not any(fnmatch.fnmatchcase(user, p) for p in users):
        return f"sshd's AllowUsers ({' '.join(users)}) does not admit {user}"
    methods = settings.get("authenticationmethods", "any")
    if methods != "any" and "publickey" not in methods.split():
        return f"sshd requires AuthenticationMethods {methods}"
    return None


def tool_problems(host, tools, probe):
    """What a node lacks of the host tools a stage relies on, each naming host, tool and fix.

    ``tools``: [{kind: program|process|sshd_key_login, name, why, fix}]; ``probe``: the node's
    reading (spark_node_info's ``host``: ``programs``, ``processes``, ``sshd``).
    """
    problems = []
    for tool in tools or ():
        kind, name = tool["kind"], str(tool["name"])
        if kind == "program":
            if (probe.get("programs") or {}).get(name) == "present":
                continue
            what = f"{name} is not installed"
        elif kind == "process":
            if (probe.get("processes") or {}).get(name):
                continue
            what = f"no {name} process runs"
        elif kind == "sshd_key_login":
            refused = sshd_key_login_problem(name, probe.get("sshd"))
            if refused is None:
                continue
            what = f"{refused}, so {name} cannot log in with a key"
        else:
            raise ValueError(f"unknown host tool kind {kind!r}")
        problems.append(f"{host}: {what} ({tool['why']}); fix: {tool['fix']}")
    return problems


def _gpu_problems(host, need, probe):
    """The profile asks for GPUs but docker has neither the NVIDIA runtime nor its hook."""
    runtimes = probe.get("runtimes") or []
    hook = (probe.get("programs") or {}).get(GPU_HOOK) == "present"
    if not need["gpus"] or "nvidia" in runtimes or hook:
        return []
    cdi = probe.get("cdi") or []
    return [
        f"{host}: the profile asks for GPUs (container.gpus {need['gpus']}, docker's --gpus) "
        f"but docker has no NVIDIA runtime (runtimes: {', '.join(runtimes) or 'none'}) and "
        f"{GPU_HOOK} is not installed"
        + (
            f"; the CDI spec ({', '.join(cdi)}) serves --device nvidia.com/gpu=all, not --gpus"
            if cdi
            else ""
        )
        + "; fix: install nvidia-container-toolkit, run `nvidia-ctk runtime configure "
        "--runtime=docker` and restart docker"
    ]


def _device_problems(host, need, probe):
    """The container's devices that do not exist on the node."""
    return [
        f"{host}: {device} (container.devices) does not exist; fix: load the RDMA "
        "drivers (mlx5_ib, ib_uverbs: DOCA-OFED / MLNX_OFED) so the HCA shows up, or "
        "remove the device from sglang_profile_overrides.container.devices"
        for device in need["devices"]
        if (probe.get("devices") or {}).get(device) != "present"
    ]


def _verbs_problems(host, need, probe):
    """The data-plane HCAs without a verbs device, when the engine uses RDMA."""
    problems = []
    for hca, rec in sorted((probe.get("uverbs") or {}).items()) if need["verbs"] else []:
        if rec.get("error") or not rec.get("devices") or rec.get("missing"):
            state = (
                rec.get("error")
                or (f"{', '.join(rec['missing'])} missing" if rec.get("missing") else "")
                or "no verbs device (uverbs) for it"
            )
            problems.append(
                f"{host}: the data-plane HCA {hca} (roce_hca) has {state}, so the engine's "
                "/dev/infiniband gives NCCL no RDMA device; fix: load ib_uverbs and mlx5_ib "
                "(DOCA-OFED / MLNX_OFED), then "
                "`ls /sys/class/infiniband/*/device/infiniband_verbs` lists it"
            )
    return problems


def _image_problems(host, profile, probe, image_pull):
    """The engine's image could not be inspected, or is not on the node and is not pulled."""
    if probe.get("image_error"):
        return [
            f"{host}: docker could not inspect image {profile.get('image')} (sglang_engine.image): "
            f"{probe['image_error']}; fix: make `docker image inspect` work on {host}, then re-run"
        ]
    if not probe.get("image_id") and not image_pull:
        return [
            f"{host}: image {profile.get('image')} (sglang_engine.image) is not on this node; "
            f"fix: load it on {host} (`docker save` on a node that has it, `docker load -i` "
            "here), or set sglang_patches_pull: true if a registry serves it"
        ]
    return []


def _path_problems(host, need, probe, staged, check_paths):
    """The host paths the container mounts that are missing or of the wrong kind."""
    problems = []
    staged = {str(path).rstrip("/") for path in staged or () if path}
    for item in need["paths"] if check_paths else []:
        if item["path"].rstrip("/") in staged:
            continue
        found = (probe.get("paths") or {}).get(item["path"], "missing")
        if found != item["kind"]:
            if found == "missing":
                state = "missing"
            elif found == "other":
                state = f"neither a file nor a directory, not a {item['kind']}"
            else:
                state = f"a {found}, not a {item['kind']}"
            problems.append(
                f"{host}: {item['what']} {item['container']} is mounted from {item['path']}, "
                f"which is {state}; fix: "
                + item.get(
                    "fix",
                    f"stage it at {item['path']} on {host} before site.yml, or let the weights "
                    "stage fetch it (model_weights_enabled, model_repo and model_revision)",
                )
            )
    return problems


def _memory_problems(host, profile, need, probe):
    """The container's memory limit does not fit what the node has available."""
    short = memory_problem(
        host,
        need["memory"],
        int(probe.get("mem_available") or 0) + int(probe.get("mem_held") or 0),
        profile["container"]["memory"] if need["memory"] else None,
        "MemAvailable plus what this rank's engine holds now",
        "stop what else uses the memory (a leaked engine: drop the page cache or reboot), "
        "or lower container.memory",
    )
    return [short] if short else []


def host_problems(
    host, profile, probe, image_pull=False, check_paths=True, staged=(), offline=False, tools=()
):
    """Problems of one node for ``profile``, each naming host, what is missing and the fix.

    ``staged``: host paths a later stage of the same run provides (the weights stage's
    model directory and chat template); they are not required yet.

    ``probe``: what the node reported (spark_node_info's ``host``): ``runtimes`` (docker
    runtime names), ``cdi`` (CDI spec files naming nvidia.com/gpu), ``devices``
    ({path: "present"|"missing"}) and ``paths`` ({path: "file"|"dir"|"other"|"missing"}),
    ``image_id`` ("" when absent), ``image_error`` (docker could not say), ``mem_available``
    (bytes) and ``mem_held`` (bytes the rank's running container uses now; freed by the
    restart). ``tools``: the host tools the run's stages rely on (``tool_problems``).
    """
    if not isinstance(probe, dict):
        raise ValueError(f"the node's reading is not a mapping: {probe!r}")
    need = host_requirements(profile, offline)
    return (
        _gpu_problems(host, need, probe)
        + _device_problems(host, need, probe)
        + _verbs_problems(host, need, probe)
        + _image_problems(host, profile, probe, image_pull)
        + _path_problems(host, need, probe, staged, check_paths)
        + _memory_problems(host, profile, need, probe)
        + tool_problems(host, tools, probe)
    )


def rank_config(profile, rank, paths, env, patches, roce, command):
    """The launch configuration of one rank: the JSON its launcher reads (no secret in it).

    ``rank``: ``rank`` (number), ``name`` (container), ``launcher`` (the path its
    containers are labelled with), ``image_id`` (what the patches were cut from).
    ``paths``: ``env_file``, ``log_dir``, ``stopped_mark``, ``meminfo`` and ``stat_file``
    (the btime of the node's boot). ``env``: the rank's environment (KEY -> value), in
    order. ``patches``: ``mounts`` and ``pyc_masks`` ([host, container] pairs). ``roce``:
    the data plane the roce stage published (``mtu``, ``gid_mode``, ``roce_version``,
    ``sysfs_root`` and ``functions``, each ``iface``, ``hca`` and ``address``; without
    ``functions`` the one of ``iface``, ``hca``, ``address``). ``command``: what the image
    runs (interpreter, server args). ``profile``'s ``image`` and container section and the
    ``log`` / ``stop`` / ``boot_wait_s`` settings of ``rank`` complete it.

    With gid_mode ``discover`` the file says where the launcher finds the GID of each
    function's data-plane address at each start, not its index: a moved index (a reboot, a
    hardware swap) changes neither this file nor the configuration hash.
    """
    if roce["gid_mode"] not in ("discover", "auto"):
        raise ValueError(f"unknown gid_mode {roce['gid_mode']!r} (discover or auto)")
    functions = roce.get("functions") or [
        {"iface": roce["iface"], "hca": roce["hca"], "address": roce["address"]}
    ]
    links = [
        {
            "iface": fn["iface"],
            "mtu": int(roce["mtu"]),
            "gid": {
                "root": roce["sysfs_root"],
                "hca": fn["hca"],
                "address": fn["address"],
                "roce_version": int(roce["roce_version"]),
            }
            if roce["gid_mode"] == "discover"
            else None,
        }
        for fn in functions
    ]
    docker_args = [*container_args(profile), "--env-file", paths["env_file"]]
    for key, value in env.items():
        docker_args += ["-e", f"{key}={value}"]
    docker_args += container_volumes(profile)
    for host, inside in [*patches["mounts"], *patches["pyc_masks"]]:
        docker_args += ["-v", f"{host}:{inside}:ro"]
    memory = host_requirements(profile)["memory"]
    return {
        "host": rank["host"],
        "name": rank["name"],
        "launcher": rank["launcher"],
        "rank": int(rank["rank"]),
        "image": profile["image"],
        "image_id": rank["image_id"],
        "env_file": paths["env_file"],
        "log_dir": paths["log_dir"],
        "stopped_mark": paths["stopped_mark"],
        "stop_timeout_s": int(rank["stop_timeout_s"]),
        "log_max_size": str(rank["log_max_size"]),
        "log_max_files": int(rank["log_max_files"]),
        "patch_files": [host for host, _inside in patches["mounts"]],
        "node": {
            "links": links,
            "boot_wait_s": int(rank["boot_wait_s"]),
            "stat_file": paths["stat_file"],
        },
        # memcheck (after every rank stopped): MemAvailable of meminfo must cover need_bytes.
        "memory": {
            "meminfo": paths["meminfo"],
            "need_bytes": int(memory),
            "setting": str(profile["container"]["memory"]) if memory else None,
        },
        "docker_args": docker_args,
        "command": [str(arg) for arg in command],
    }
