# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What one node holds, read in one pass (module spark_node_info).

Pure parsing and record-building, unit-tested without a node: the module only runs the
commands these functions name and hands their output back here. Each reader returns a
record with an ``error`` string instead of raising, so one unreadable item never hides
the state of the others (the caller decides what is fatal).
"""

from __future__ import annotations

import grp
import ipaddress
import json
import os
import pwd
import re
import stat

from ansible_collections.sparkfleet.serving.plugins.module_utils._gid import (
    GidError,
    list_hcas,
    read_table,
    select,
)
from ansible_collections.sparkfleet.serving.plugins.module_utils._weights import (
    MANIFEST,
    check_revision,
    load_json,
    revision_dir,
    sha256_file,
)

# Linux's IPv4 and ICMP headers: a no-fragment ping of MTU - 28 payload bytes fills the MTU.
PING_OVERHEAD = 28
_RTT_RE = re.compile(r"time[=<]([0-9.]+) ?ms")


def _owner(uid):
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _group(gid):
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def path_record(path, checksum=True):
    """State of one managed path: type, mode, owner, group, and sha256 or link target.

    ``{"exists": False}`` for a path that is not there; ``checksum=False`` skips the
    hash (large files whose state another check covers).
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return {"exists": False}
    except OSError as exc:
        return {"exists": None, "error": f"{path}: {exc.strerror}"}
    record = {
        "exists": True,
        "mode": f"{stat.S_IMODE(st.st_mode):04o}",
        "owner": _owner(st.st_uid),
        "group": _group(st.st_gid),
    }
    if stat.S_ISLNK(st.st_mode):
        record.update(type="link", target=os.readlink(path))
    elif stat.S_ISDIR(st.st_mode):
        record["type"] = "directory"
    elif stat.S_ISREG(st.st_mode):
        record.update(type="file", size=st.st_size)
        if checksum:
            try:
                record["sha256"] = sha256_file(path)
            except OSError as exc:
                record["error"] = f"{path}: {exc.strerror}"
    else:
        record["type"] = "other"
    return record


def json_record(path):
    """The parsed content of a small JSON file the collection wrote (a record, a manifest)."""
    try:
        with open(path, encoding="utf-8") as handle:
            return {"exists": True, "content": json.load(handle)}
    except FileNotFoundError:
        return {"exists": False}
    except (OSError, ValueError) as exc:
        return {"exists": True, "error": f"{path}: {exc}"}


def disk_record(path):
    """Free bytes (as df's Available) of the filesystem that holds ``path`` or, when it does
    not exist yet, its nearest existing parent (``at``)."""
    at = os.path.abspath(path)
    while not os.path.exists(at) and at != os.path.dirname(at):
        at = os.path.dirname(at)
    try:
        st = os.statvfs(at)
    except OSError as exc:
        return {"at": at, "error": f"{at}: {exc.strerror}"}
    return {"at": at, "free_bytes": st.f_bavail * st.f_frsize}


def weights_record(store, repo, commit):
    """Quick verification of one staged revision: present, missing or bad (read-only)."""
    root = revision_dir(store, repo, commit)
    manifest = load_json(os.path.join(root, MANIFEST)) if os.path.isdir(root) else None
    if not manifest:
        return {"state": "missing", "bad": []}
    try:
        bad, _verified, rehashed = check_revision(root, manifest, False)
    except (OSError, KeyError, ValueError) as exc:
        return {"state": "bad", "bad": [], "error": str(exc)}
    # Read-only: files whose stat changed were hashed again here but their verification
    # record is not updated, so the weights stage is entered to record them (else every
    # probe would hash them again).
    return {
        "state": "bad" if bad else "present",
        "bad": [b["path"] for b in bad],
        "rehashed": bool(rehashed),
    }


def nic_records(ip_json, names, sysfs_net="/sys/class/net"):
    """Per NIC name: exists, operstate, mtu and its IPv4 addresses (CIDR), in their order.

    ``ip_json``: what ``ip -j addr show`` printed (every link). The order of the IPv4
    addresses matters: the first one is what a socket bound to the NIC uses (Pitfall 1).
    """
    try:
        links = {link.get("ifname"): link for link in json.loads(ip_json or "[]")}
    except ValueError as exc:
        return {name: {"exists": None, "error": f"ip -j addr: {exc}"} for name in names}
    out = {}
    for name in names:
        link = links.get(name)
        if link is None:
            out[name] = {"exists": False}
            continue
        out[name] = {
            "exists": True,
            "operstate": str(link.get("operstate", "UNKNOWN")).lower(),
            "mtu": int(link.get("mtu", 0)),
            "ipv4": [
                "{}/{}".format(a["local"], a["prefixlen"])
                for a in link.get("addr_info", [])
                if a.get("family") == "inet"
            ],
            "carrier": _read_int(os.path.join(sysfs_net, name, "carrier")),
        }
    return out


def subnet_intruders(ip_json, data_subnets):
    """Warnings: a NIC other than a data-plane function's holding an address inside that
    function's subnet (``data_subnets``: [{iface, subnet}]); its route competes with the
    data plane's, and NCCL's address range would admit it."""
    if not data_subnets:
        return []
    try:
        links = json.loads(ip_json or "[]")
        nets = [
            (str(d["iface"]), ipaddress.IPv4Network(str(d["subnet"]), strict=False))
            for d in data_subnets
        ]
    except (ValueError, KeyError, TypeError):
        return []
    own = {iface for iface, _net in nets}
    out = []
    for link in links:
        name = link.get("ifname")
        if name in own:
            continue
        for a in link.get("addr_info", []):
            if a.get("family") != "inet":
                continue
            addr = ipaddress.IPv4Address(a["local"])
            for iface, net in nets:
                if addr in net:
                    out.append(
                        f"{name} holds {addr}/{a.get('prefixlen')}, inside the data-plane subnet "
                        f"{net} of {iface}: its route competes with the data plane's; move it "
                        "out of that subnet"
                    )
    return out


def _read_int(path):
    try:
        with open(path, encoding="ascii") as handle:
            return int(handle.read().strip())
    except (OSError, ValueError):
        return None


def gid_record(root, address, version=2, hca=None):
    """The GID row of ``address`` as roce_gid_info selects it, or the reason there is none."""
    try:
        rows = read_table(root)
        row = select(rows, address, version, hca=hca or None, hcas=list_hcas(root))
    except GidError as exc:
        return {"found": False, "error": str(exc)}
    return {
        "found": True,
        "index": row["index"],
        "hca": row["hca"],
        "port": row["port"],
        "gid": row["gid"],
        "netdev": row["netdev"],
    }


def ping_argv(ping, address, size, timeout_s, count=1):
    """``count`` no-fragment pings of ``size`` payload bytes (``ping -M do -s SIZE``)."""
    gap = ["-i", "0.2"] if count > 1 else []
    return [
        ping,
        "-M",
        "do",
        "-c",
        str(count),
        *gap,
        "-W",
        str(timeout_s),
        "-s",
        str(size),
        address,
    ]


def ping_record(rc, stdout, stderr, size):
    """The answer of one ping_argv run: ok, its round trip, or why it failed."""
    if rc == 0:
        match = _RTT_RE.search(stdout or "")
        return {"ok": True, "size": size, "rtt_ms": float(match.group(1)) if match else None}
    err = (stderr or "").strip()
    lines = (stdout or "").strip().splitlines()
    too_big = [
        line.strip()
        for line in [*err.splitlines(), *lines]
        if "message too long" in line.lower() or "frag needed" in line.lower()
    ]
    if too_big:
        why = f"a {size}-byte no-fragment ping does not fit the path MTU ({too_big[0]})"
    elif err:
        why = err.splitlines()[-1]
    else:
        why = "no answer" if rc == 1 else (lines[-1] if lines else f"rc {rc}")
    return {"ok": False, "size": size, "rc": rc, "error": why.strip()}


def docker_records(inspect_json, names, kind):
    """Per image or container name, from one ``docker <kind> inspect NAME...`` output.

    docker prints the objects it found and exits 1 naming the others on stderr; those
    are ``{"exists": False}``.
    """
    try:
        found = json.loads(inspect_json or "[]")
    except ValueError:
        found = []
    out = {name: {"exists": False} for name in names}
    for obj in found:
        if kind == "image":
            keys = {obj.get("Id")} | set(obj.get("RepoTags") or [])
            record = {"exists": True, "id": obj.get("Id")}
        else:
            keys = {str(obj.get("Name", "")).lstrip("/"), obj.get("Id")}
            state = obj.get("State") or {}
            record = {
                "exists": True,
                "id": obj.get("Id"),
                "image": obj.get("Image"),
                "status": state.get("Status"),
                "running": bool(state.get("Running")),
                "started_at": state.get("StartedAt"),
                "exit_code": state.get("ExitCode"),
                "labels": {
                    k: v
                    for k, v in ((obj.get("Config") or {}).get("Labels") or {}).items()
                    if k.startswith("sparkfleet.")
                },
            }
        for name in names:
            if name in keys or (kind == "image" and _short_ref(name) in keys):
                out[name] = record
    return out


def _short_ref(name):
    """``name`` with docker's implicit ``:latest`` when it carries no tag or digest."""
    last = name.rsplit("/", 1)[-1]
    return name if (":" in last or "@" in name) else name + ":latest"


def path_kind(path):
    """``dir``, ``file``, ``other`` or ``missing``, following links (as a mount would)."""
    if os.path.isdir(path):
        return "dir"
    if os.path.isfile(path):
        return "file"
    return "other" if os.path.exists(path) else "missing"


def cdi_specs(dirs, device="nvidia.com/gpu"):
    """The CDI spec files (``*.yaml``, ``*.json``) in ``dirs`` that name ``device``."""
    found = []
    for directory in dirs:
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        for name in names:
            path = os.path.join(directory, name)
            if not name.endswith((".yaml", ".json")) or not os.path.isfile(path):
                continue
            try:
                with open(path, encoding="utf-8", errors="replace") as handle:
                    if device in handle.read():
                        found.append(path)
            except OSError:
                continue
    return found


def docker_info_record(rc, out, err):
    """Daemon version and runtime names from ``docker info --format '{{json .}}'``.

    Without a daemon the client still prints its JSON (an empty ServerVersion), exits 1 and
    says why on stderr.
    """
    try:
        info = json.loads(out or "{}")
    except ValueError:
        info = {}
    if not isinstance(info, dict) or not info.get("ServerVersion"):
        why = (err or "").strip() or f"docker info exited {rc} without a server version"
        return {"ok": False, "error": why}
    return {
        "ok": True,
        "version": info["ServerVersion"],
        "runtimes": sorted((info.get("Runtimes") or {}).keys()),
    }


def uverbs_record(sysfs_root, hca, dev_dir="/dev/infiniband"):
    """The verbs devices of one HCA (what an RDMA process in a container opens).

    ``{"devices": [paths], "missing": [paths absent under dev_dir]}``: the kernel lists them
    under ``<sysfs_root>/<hca>/device/infiniband_verbs/uverbs<N>``; an HCA without one (the
    ib_uverbs module not loaded) has ``devices`` empty. ``error`` when the HCA is unknown.
    """
    if not os.path.isdir(os.path.join(sysfs_root, hca)):
        return {"devices": [], "missing": [], "error": f"{sysfs_root}/{hca}: no such HCA"}
    try:
        names = sorted(
            n
            for n in os.listdir(os.path.join(sysfs_root, hca, "device", "infiniband_verbs"))
            if n.startswith("uverbs")
        )
    except OSError:
        names = []
    devices = [os.path.join(dev_dir, n) for n in names]
    return {"devices": devices, "missing": [d for d in devices if not os.path.exists(d)]}


def running_processes(names, proc_root="/proc"):
    """{name: True when a process of that name (its comm) runs} for each name asked."""
    wanted = {str(n) for n in names}
    seen = set()
    try:
        entries = os.listdir(proc_root)
    except OSError:
        entries = []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(os.path.join(proc_root, entry, "comm"), encoding="utf-8") as fh:
                comm = fh.read().strip()
        except OSError:
            continue
        if comm in wanted:
            seen.add(comm)
    return {name: name in seen for name in sorted(wanted)}


# What `sshd -T` says that decides whether a user may log in with a key.
SSHD_KEYS = ("permitrootlogin", "pubkeyauthentication", "allowusers", "denyusers",
             "authenticationmethods")  # fmt: skip


def sshd_record(rc, out, err):
    """sshd's effective settings for a connection (``sshd -T -C user=..,addr=..``), or why not."""
    if rc != 0:
        return {"ok": False, "error": (err or "").strip() or f"sshd -T exited {rc}"}
    settings = {}
    for line in (out or "").splitlines():
        key, _sep, value = line.strip().partition(" ")
        key = key.lower()
        if key in SSHD_KEYS:
            settings[key] = " ".join(filter(None, [settings.get(key, ""), value.strip()]))
    return {"ok": True, "settings": settings}
