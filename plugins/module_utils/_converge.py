# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Converge: does a stage have anything to do on a node?

A stage that ran records a stamp on the node (``<converge dir>/<stage>.json``): the
digest of everything it was given (computed on the controller from the role's files,
the collection's plugins and the values of every option its argument specs declare),
the state of every path it manages as it left them (type, mode, owner, group, sha256
or link target, or absence), and the facts it published for later stages. The next run
reads every stamp with one call per node (``spark_node_info``) and a stage is entered
only when the digest differs, a recorded path no longer is what the stage left (a hand
edit of content, mode, owner or link), or a live check says so (an MTU, an address, a
GID row, a container). Everything here is pure: the module, the stamp writer and the
controller's filters share it.
"""

from __future__ import annotations

import hashlib
import json
import os

STAMP_VERSION = 1

# What a path's record is compared on: content, kind, permissions and ownership.
COMPARED = ("exists", "type", "mode", "owner", "group", "sha256", "target")


def canonical(value):
    """Stable JSON text of any variable value (keys sorted, unknown types as text)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def file_sha256(path):
    sha = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()


def tree_digest(root):
    """sha256 over every file of a directory tree (relative path and content)."""
    sha = hashlib.sha256()
    for top, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith((".pyc", ".md")):
                continue
            path = os.path.join(top, name)
            sha.update(os.path.relpath(path, root).encode())
            sha.update(b"\0")
            sha.update(file_sha256(path).encode())
            sha.update(b"\n")
    return sha.hexdigest()


def digest(values, trees=()):
    """The desired-state digest of a stage: its inputs' values and its code."""
    sha = hashlib.sha256()
    sha.update(canonical(values).encode())
    for tree in trees:
        sha.update(b"\n")
        sha.update(tree.encode())
    return sha.hexdigest()


def compared(record):
    """The part of a path record a drift check compares (no size, no errors)."""
    record = record or {}
    out = {key: record[key] for key in COMPARED if key in record}
    if record.get("type") == "directory":
        out.pop("sha256", None)
    return out


def path_drift(recorded, actual):
    """One reason per managed path that is not as the stage left it."""
    reasons = []
    for path in sorted(recorded or {}):
        want = compared(recorded[path])
        got = compared((actual or {}).get(path))
        if (actual or {}).get(path, {}).get("error"):
            reasons.append(f"{path}: {(actual or {})[path]['error']}")
            continue
        if want == got:
            continue
        if want.get("exists") and not got.get("exists"):
            reasons.append(f"{path}: missing")
        elif got.get("exists") and not want.get("exists"):
            reasons.append(f"{path}: present, the stage left it absent")
        else:
            diffs = [
                f"{key} {got.get(key)!s:.16} (was {want.get(key)!s:.16})"
                for key in COMPARED
                if want.get(key) != got.get(key)
            ]
            reasons.append(f"{path}: {', '.join(diffs)}")
    return reasons


def stamp_reasons(stage, want_digest, stamp, actual=None):
    """Why a stage must run on a node, from its stamp as the probe read it.

    ``stamp`` is the probe's record of the stamp file (``exists``, ``content`` or
    ``error``); ``actual`` the probe's records of the paths the stamp lists.
    """
    stamp = stamp or {}
    if stamp.get("error"):
        return [f"stamp unreadable ({stamp['error']})"]
    content = stamp.get("content") if stamp.get("exists") else None
    if not isinstance(content, dict):
        return ["never converged on this node"]
    if content.get("version") != STAMP_VERSION:
        return ["stamp of another format"]
    if content.get("digest") != want_digest:
        return [f"inputs of stage {stage} changed (its roles, the plugins or its variables)"]
    return path_drift(content.get("paths"), actual)


def stamp(stage, want_digest, paths, outputs):
    """The stamp a stage writes once it ran: what it was given and what it left."""
    return {
        "version": STAMP_VERSION,
        "stage": stage,
        "digest": want_digest,
        "paths": {path: compared(record) for path, record in sorted(paths.items())},
        "outputs": outputs or {},
    }


def launch_config_hash(file_sha256s):
    """The configuration hash of a rank: the launcher, its env file, its patched files.

    The one rule shared by the role (what should run), the launcher (what it starts and
    labels its container with) and the converge probe (what runs).
    """
    text = "".join(f"{sha}\n" for sha in file_sha256s)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def roce_reasons(probe, want):
    """Live differences of the data plane: NICs, MTU, addresses, GID rows, netplan, pings.

    ``want``: ``mtu``, ``functions`` (each ``iface`` and ``address``, CIDR; without it the
    one of ``iface`` and ``address``) and ``recorded`` (the roce_node the stage published
    when it last ran, or None). The probe's ``gids`` are the functions' GID rows in their
    order.
    """
    reasons = []
    functions = want.get("functions") or [{"iface": want["iface"], "address": want["address"]}]
    recorded = want.get("recorded") or {}
    was = recorded.get("functions") or ([recorded] if recorded else [])
    rows = probe.get("gids") or [{}]
    for n, fn in enumerate(functions):
        iface, address = fn["iface"], fn["address"]
        nic = (probe.get("nics") or {}).get(iface) or {}
        if nic.get("error"):
            reasons.append(f"{iface}: {nic['error']}")
        elif not nic.get("exists"):
            reasons.append(f"{iface}: no such NIC")
        else:
            if int(nic.get("mtu") or 0) != int(want["mtu"]):
                reasons.append(f"{iface}: MTU {nic.get('mtu')}, want {want['mtu']}")
            if address not in (nic.get("ipv4") or []):
                reasons.append(f"{iface}: {address} not assigned")
        gid = (rows[n] if n < len(rows) else None) or {}
        rec = (was[n] if n < len(was) else None) or {}
        if not gid.get("found"):
            reasons.append(f"no RoCE GID row for {address.split('/')[0]}")
        elif recorded and (
            # The whole row the stage publishes (a stage not entered publishes the probe's).
            str(rec.get("gid_index")) != str(gid.get("index"))
            or rec.get("gid") != gid.get("gid")
            or rec.get("hca") != gid.get("hca")
            or str(rec.get("gid_port")) != str(gid.get("port"))
            or rec.get("netdev") != gid.get("netdev")
        ):
            reasons.append(
                f"GID row moved: index {gid.get('index')} on {gid.get('hca')}, "
                f"recorded {rec.get('gid_index')} on {rec.get('hca')}"
            )
    # A second profile for the port (NetworkManager's own netplan file): the stage refuses it
    # naming the files; seen here so that one appearing later is not missed.
    for iface, profiles in sorted(((probe.get("netplan") or {}).get("ports") or {}).items()):
        if len(profiles) > 1:
            reasons.append(
                f"netplan gives {iface} {len(profiles)} profiles ("
                + ", ".join(p["id"] for p in profiles)
                + ")"
            )
    for peer, ping in sorted((probe.get("peers") or {}).items()):
        if not ping.get("ok"):
            reasons.append(f"jumbo ping to {peer}: {ping.get('error') or 'failed'}")
    return reasons


def weights_reasons(probe, _want=None):
    """Staged revisions that are missing or no longer verify, or whose record is stale."""
    reasons = []
    for name, rec in sorted((probe.get("weights") or {}).items()):
        if rec.get("state") != "present":
            bad = f" ({', '.join(rec['bad'][:3])})" if rec.get("bad") else ""
            reasons.append(f"weights {name}: {rec.get('state')}{bad}")
        elif rec.get("rehashed"):
            reasons.append(
                f"weights {name}: files changed on disk verify, their record is out of date"
            )
    return reasons


def image_reasons(probe, want):
    """The engine image's local id differs from the one the patches were cut from."""
    image = (probe.get("images") or {}).get(want["image"]) or {}
    if not image.get("exists"):
        return [f"image {want['image']}: not on this node"]
    if want.get("image_id") and image.get("id") != want["image_id"]:
        got, cut = str(image.get("id"))[:19], str(want["image_id"])[:19]
        return [f"image {want['image']}: id {got}, patches cut from {cut}"]
    return []


def rank_reasons(probe, want):
    """A rank not running its current configuration (``container``, ``config_hash``), or
    running a RoCE GID index the table no longer holds its address at (the launcher finds
    the index at each start, outside the configuration: a restart moves the rank to it)."""
    box = (probe.get("containers") or {}).get(want["container"]) or {}
    if not box.get("running"):
        return [f"{want['container']}: {box.get('status') or 'absent'}"]
    labels = box.get("labels") or {}
    label = labels.get("sparkfleet.config")
    if label != want["config_hash"]:
        return [f"{want['container']}: runs configuration {label}, current {want['config_hash']}"]
    # The one NCCL_IB_GID_INDEX is the first function's (the launcher refuses unequal ones).
    running = labels.get("sparkfleet.gid-index")
    gid = (probe.get("gids") or [{}])[0] or {}
    if running is not None and gid.get("found") and str(running) != str(gid.get("index")):
        return [
            f"{want['container']}: runs RoCE GID index {running}, the table now holds "
            f"the data-plane address at {gid.get('index')}"
        ]
    return []


LIVE = {
    "roce": roce_reasons,
    "weights": weights_reasons,
    "image": image_reasons,
    "rank": rank_reasons,
}


# --- memory: the one rule of "can this node hold the rank's engine now" ----------------
# Read by spark_node_info (the preflight host check) and by the launcher's memcheck (after
# the cluster control stopped every rank, before it starts any).


def mem_available(meminfo="/proc/meminfo"):
    """MemAvailable of ``meminfo`` in bytes; None when it cannot be read."""
    try:
        with open(meminfo, encoding="ascii", errors="replace") as handle:
            for line in handle:
                key, _sep, value = line.partition(":")
                if key == "MemAvailable":
                    number, _sep, unit = value.strip().partition(" ")
                    return int(number) * (1024 if unit.lower() == "kb" else 1)
    except (OSError, ValueError):
        return None
    return None


def memory_problem(host, need, free, setting, counted, fix):
    """The shortfall of one node as one line naming host, figures and fix; None when enough.

    ``need``: bytes the rank's container may use (the profile's container.memory);
    ``free``: bytes available for it (None: could not be read, counted as none);
    ``setting``: the profile value, as written; ``counted``: what ``free`` is made of.
    """
    if not need or (free is not None and free >= need):
        return None
    gib = 1024**3
    return (
        f"{host}: the container's memory limit (container.memory {setting}) needs "
        f"{need / gib:.1f} GiB but {(free or 0) / gib:.1f} GiB is available ({counted}); fix: {fix}"
    )
