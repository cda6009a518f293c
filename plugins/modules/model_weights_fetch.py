#!/usr/bin/python
# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: model_weights_fetch
short_description: Download one pinned model revision from a Hugging Face mirror, verified
version_added: 0.2.0
author: sparkfleet maintainers (@sparkfleet)
description:
  - Resolves O(repo) at O(revision) on the mirror O(endpoint) with the real C(huggingface_hub)
    client, lists its files (the tree API gives size and, for LFS files, the sha256), checks the
    disk, downloads every file into C(<store>/<org>--<repo>/.<commit>.partial/) and verifies it
    (sha256 for LFS files, git blob id for the others). When every file is verified it writes the
    manifest C(.sparkfleet-manifest.json) (repo, revision, commit, per-file size and sha256) and
    renames the directory to C(<store>/<org>--<repo>/<commit>/).
  - Resumable. Files verified before an interruption are not fetched again; a staged, verified
    revision is a no-op (its files are re-hashed only when their size, mtime or inode changed,
    or with O(verify=full)).
  - Must run under a Python that has C(huggingface_hub) (the role installs it in a dedicated
    virtualenv and points C(ansible_python_interpreter) at it).
  - A file that fails verification is removed from the staging directory and the module fails
    naming node, file, expected and actual digest.
  - Repairs a staged revision whose files no longer verify (with O(verify=full) also a file whose
    bytes changed with its size and mtime kept) - the corrupt files leave the revision directory at
    once, only they are downloaded into the staging directory, verified against the revision's
    manifest (sha256) and renamed into place; the revision directory stays where the engine loads
    it. The staging directory of a repair is removed whether the repair succeeds or fails.
extends_documentation_fragment:
  - sparkfleet.serving.attributes
attributes:
  check_mode:
    support: full
    details:
      - Resolves the revision and lists the files (read-only requests) and reports what would be
        downloaded.
  diff_mode:
    support: none
  idempotent:
    support: full
options:
  repo:
    description: Model repository id (C(org/name)).
    type: str
    required: true
  revision:
    description:
      - The pin, a 40-character commit sha. Branch and tag names are refused (they move).
    type: str
    required: true
  store:
    description: Directory holding staged revisions.
    type: path
    required: true
  endpoint:
    description: The mirror (E(HF_ENDPOINT)).
    type: str
    required: true
  token_file:
    description:
      - File (0600) holding the Hugging Face token, for gated repositories. Never a module argument.
      - Read only when O(endpoint) is C(https://huggingface.co) or listed in O(token_endpoints);
        otherwise no token is sent. Without one the client sends none either (not the node's
        E(HF_TOKEN) nor a token saved by C(hf auth login)).
    type: path
  token_endpoints:
    description:
      - Endpoints besides C(https://huggingface.co) that may receive the token (scheme, host and
        port compared), the cluster variable C(sglang_hf_token_endpoints).
    type: list
    elements: str
    default: []
  disable_xet:
    description:
      - Set E(HF_HUB_DISABLE_XET=1) for the client (seed Pitfall 7). Only a test turns this off.
    type: bool
    default: true
  verify:
    description:
      - V(quick) re-hashes only files whose stat changed since they were last verified; V(full)
        re-hashes every file.
    type: str
    choices: [quick, full]
    default: quick
  headroom_bytes:
    description: Free space to keep on top of the download.
    type: int
    default: 0
  progress_file:
    description:
      - JSON file the module rewrites every few seconds with bytes done, total and rate (the role
        polls it to print progress).
    type: path
  node:
    description: Name of this node in messages (the inventory hostname).
    type: str
    default: this node
"""

EXAMPLES = r"""
- name: Stage the draft model on the head
  sparkfleet.serving.model_weights_fetch:
    repo: z-lab/Qwen3.8-27B-DFlash2
    revision: 50307d4c4cde6860d4eee73e2547cd786fe8e8a4
    store: /home/tiger/models/.sparkfleet-weights
    endpoint: https://hf-mirror.com
  vars:
    ansible_python_interpreter: /opt/sparkfleet/hf-venv/bin/python
"""

RETURN = r"""
token_sent:
  description: Whether the token was given to the client (a token file and a trusted endpoint).
  returned: always
  type: bool
commit:
  description: The resolved commit sha.
  returned: success
  type: str
path:
  description: Directory of the staged revision.
  returned: success
  type: str
files:
  description: Files of the revision (path, size, sha256, etag).
  returned: success
  type: list
  elements: dict
downloaded:
  description: Paths fetched from the mirror by this run.
  returned: success
  type: list
  elements: str
downloaded_bytes:
  description: Bytes fetched from the mirror by this run.
  returned: success
  type: int
repaired:
  description: Files of a staged revision that failed verification and were replaced.
  returned: success
  type: list
  elements: str
"""

import contextlib
import os
import shutil
import threading
import time
import types

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkfleet.serving.plugins.module_utils import _weights as weights


class _Progress(threading.Thread):
    def __init__(self, path, root, total, done):
        super().__init__(daemon=True)
        self.path, self.root, self.total, self.base = path, root, total, done
        self.stop = threading.Event()
        self.started = time.time()

    def measure(self):
        size = 0
        for dirpath, _dirs, names in os.walk(self.root):
            for name in names:
                if name.startswith(".sparkfleet"):
                    continue
                with contextlib.suppress(OSError):
                    size += os.path.getsize(os.path.join(dirpath, name))
        return size

    def run(self):
        last, last_t = self.measure(), time.time()
        while not self.stop.wait(3):
            now, now_t = self.measure(), time.time()
            rate = (now - last) / max(now_t - last_t, 1e-3)
            last, last_t = now, now_t
            self.write(now, rate)

    def write(self, done, rate):
        if not self.path:
            return
        done = min(done, self.total)
        weights.write_json(
            self.path,
            {
                "done": done,
                "total": self.total,
                "rate": rate,
                "line": weights.progress_line(done, self.total, rate, time.time() - self.started),
            },
        )


def _staged_revision(module, final, repo, revision, full, result):
    """The staged revision's manifest and failing files; exits when the whole revision verifies."""
    staged = (
        weights.load_json(os.path.join(final, weights.MANIFEST)) if os.path.isdir(final) else None
    )
    if staged is not None and weights.manifest_matches(staged, repo, revision):
        staged = None
    bad = []
    if staged is not None:
        bad, verified, rehashed = weights.check_revision(final, staged, full)
        if not bad:
            if rehashed and not module.check_mode:
                weights.write_json(os.path.join(final, weights.VERIFIED), verified)
            result["files"] = staged["files"]
            module.exit_json(**result)
    return staged, bad


def _failer(module, repo, revision, part, repairing, result):
    """The run's fail: a failed repair removes its staging directory and says what it left."""

    def fail(msg, **extra):
        if repairing and not module.check_mode:
            shutil.rmtree(part, ignore_errors=True)
            if "repairing" not in msg:
                msg = (
                    f"{msg}; while repairing {', '.join(result['repaired'])} of {repo}@{revision}: "
                    "the corrupt copies were taken out of the engine's path and no staging "
                    "directory was left; fix: the cause above, then run "
                    "ansible-playbook sparkfleet.serving.verify -i <inventory> -e repair=true"
                )
        module.fail_json(msg=msg, **extra)

    return fail


def _client_environment(p):
    """Set the client's settings in the environment (it reads them at import time)."""
    os.environ["HF_ENDPOINT"] = p["endpoint"]
    os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    os.environ.pop("HF_HUB_OFFLINE", None)
    if p["disable_xet"]:
        os.environ["HF_HUB_DISABLE_XET"] = "1"
    else:
        os.environ.pop("HF_HUB_DISABLE_XET", None)


def _read_token(p, result, fail):
    """The token the client sends: the token file's for a trusted endpoint, else False."""
    # False, not None: the client would otherwise send a token it finds by itself (HF_TOKEN, a
    # saved login) to whatever the endpoint is.
    token = False
    os.environ.pop("HF_TOKEN", None)
    result["token_sent"] = bool(p["token_file"]) and weights.hf_token_sent(
        p["endpoint"], p["token_endpoints"]
    )
    if result["token_sent"]:
        try:
            with open(p["token_file"], encoding="utf-8") as handle:
                token = handle.read().strip() or False
        except OSError as exc:
            fail(msg=f"{p['node']}: cannot read the token file {p['token_file']}: {exc}")
    return token


def _client(p, result, fail):
    """The configured huggingface_hub client: its API, download, error types and token."""
    # The client reads its settings at import time: set them first.
    _client_environment(p)
    token = _read_token(p, result, fail)
    try:
        from huggingface_hub import HfApi, hf_hub_download
        from huggingface_hub.errors import (
            HfHubHTTPError,
            RepositoryNotFoundError,
            RevisionNotFoundError,
        )
    except ImportError as exc:
        fail(
            msg=f"{p['node']}: huggingface_hub is not importable by {os.sys.executable}: {exc}; "
            "the model_weights role installs it in its virtualenv"
        )
    return types.SimpleNamespace(
        HfApi=HfApi,
        hf_hub_download=hf_hub_download,
        HfHubHTTPError=HfHubHTTPError,
        RepositoryNotFoundError=RepositoryNotFoundError,
        RevisionNotFoundError=RevisionNotFoundError,
        token=token,
    )


def _list_files(p, client, token_sent, fail):
    """Resolve the revision on the mirror and list its files: (info, files, total bytes)."""
    repo, revision, node, token = p["repo"], p["revision"], p["node"], client.token
    withheld = (
        " (sglang_hf_token is set but was not sent: this endpoint is not huggingface.co and "
        "not listed in sglang_hf_token_endpoints)"
        if p["token_file"] and not token_sent
        else ""
    )
    api = client.HfApi(endpoint=p["endpoint"], token=token)
    where = f"{repo} at revision {revision} on {p['endpoint']}"
    try:
        info = api.model_info(repo, revision=revision, token=token)
        listing = api.list_repo_tree(repo, revision=revision, recursive=True, token=token)
        tree = [
            {
                "type": "file",
                "path": f.path,
                "size": f.size,
                "oid": f.blob_id,
                "lfs": {"oid": f.lfs.sha256, "size": f.lfs.size} if f.lfs else None,
            }
            for f in listing
            if getattr(f, "blob_id", None) is not None
        ]
    except client.RevisionNotFoundError as exc:
        fail(
            msg=f"{node}: the mirror has no revision {revision} of {repo} ({p['endpoint']}): {exc}"
        )
    except client.RepositoryNotFoundError as exc:
        fail(
            msg=f"{node}: the mirror has no repository {repo} at revision {revision} "
            f"({p['endpoint']}), "
            f"or it needs a token{withheld}: {exc}"
        )
    except client.HfHubHTTPError as exc:
        fail(msg=f"{node}: listing {where} failed: {exc}")
    except OSError as exc:
        fail(msg=f"{node}: cannot reach the mirror {p['endpoint']} for {where}: {exc}")
    if info.sha != revision:
        fail(msg=f"{node}: the mirror resolves {revision} of {repo} to {info.sha}")
    files = weights.tree_entries(tree)
    if not files:
        fail(msg=f"{node}: {where} lists no files")
    total = sum(f["size"] for f in files)
    return info, files, total


def _repair_todo(final, part, staged, files):
    """A fresh staging directory for a repair; the files it lacks and no verified records."""
    shutil.rmtree(part, ignore_errors=True)
    os.makedirs(part)
    lacking = {e["path"] for e in weights.missing_entries(final, staged)}
    todo = [f for f in files if f["path"] in lacking]
    return todo, {}


def _resume_todo(final, part, files, full):
    """The staging directory, resumed: the files still to download and the verified records."""
    if os.path.isdir(final) and not os.path.isdir(part):
        # A directory without a usable manifest: back to staging as a whole.
        os.rename(final, part)
    os.makedirs(part, exist_ok=True)
    verified = weights.load_json(os.path.join(part, weights.VERIFIED)) or {}
    todo = []
    for entry in files:
        path = os.path.join(part, entry["path"])
        present = os.path.isfile(path)
        if (
            present
            and not full
            and weights.same_stat(weights.stat_record(path), verified.get(entry["path"]))
        ):
            entry["sha256"] = verified[entry["path"]].get("sha256", entry["sha256"])
            continue
        if present:
            good, _exp, _got = weights.verify_file(path, entry)
            if good:
                verified[entry["path"]] = dict(weights.stat_record(path), sha256=entry["sha256"])
                continue
            os.unlink(path)
        todo.append(entry)
    weights.write_json(os.path.join(part, weights.VERIFIED), verified)
    return todo, verified


def _staging(final, part, staged, files, full):
    """Prepare the staging directory: the files still to download and the verified records."""
    os.makedirs(os.path.dirname(final), exist_ok=True)
    if staged is not None:
        return _repair_todo(final, part, staged, files)
    return _resume_todo(final, part, files, full)


def _check_disk(p, part, todo, fail):
    """Fail when the store has no room for what is still to download; the bytes needed."""
    needed = sum(f["size"] for f in todo)
    stat = os.statvfs(part)
    error = weights.disk_error(
        p["node"], p["store"], needed, stat.f_bavail * stat.f_frsize, p["headroom_bytes"]
    )
    if error:
        fail(msg=error, needed_bytes=needed, free_bytes=stat.f_bavail * stat.f_frsize)
    return needed


def _fetch_file(p, part, entry, client, repairing, fail):
    """Download one file into the staging directory and verify it; its path."""
    repo, revision, node = p["repo"], p["revision"], p["node"]
    try:
        client.hf_hub_download(
            repo, entry["path"], revision=revision, local_dir=part, token=client.token
        )
    except client.HfHubHTTPError as exc:
        hint = weights.xet_hint(exc, p["disable_xet"])
        fail(
            msg=f"{node}: downloading {repo}/{entry['path']} at {revision} "
            f"from {p['endpoint']} "
            f"failed: {exc}" + (f"; {hint}" if hint else "")
        )
    except Exception as exc:  # the client wraps transport errors in many types
        hint = weights.xet_hint(exc, p["disable_xet"])
        fail(
            msg=f"{node}: downloading {repo}/{entry['path']} at {revision} "
            f"from {p['endpoint']} "
            f"failed: {type(exc).__name__}: {exc}" + (f"; {hint}" if hint else "")
        )
    path = os.path.join(part, entry["path"])
    good, expected, got = weights.verify_file(path, entry)
    if not good:
        if os.path.exists(path):
            os.unlink(path)
        if repairing:
            fail(
                msg=weights.repair_message(
                    node,
                    repo,
                    revision,
                    entry["path"],
                    f"the mirror sent other bytes (expected {expected}, got {got})",
                    f"the mirror {p['endpoint']}",
                )
            )
        fail(msg=weights.mismatch_message(node, repo, entry["path"], expected, got))
    return path


def _download(p, part, todo, verified, total, client, repairing, result, fail):
    """Download the files still to fetch, recording each verified one and the progress."""
    needed = _check_disk(p, part, todo, fail)
    progress = _Progress(p["progress_file"], part, total, total - needed)
    progress.write(total - needed, 0.0)
    progress.start()
    try:
        for entry in todo:
            path = _fetch_file(p, part, entry, client, repairing, fail)
            verified[entry["path"]] = dict(weights.stat_record(path), sha256=entry["sha256"])
            weights.write_json(os.path.join(part, weights.VERIFIED), verified)
            result["downloaded"].append(entry["path"])
            result["downloaded_bytes"] += entry["size"]
    finally:
        progress.stop.set()
    progress.write(total, 0.0)


def _finish_repair(module, p, final, part, staged, result, fail):
    """Move the verified replacements into the staged revision and report the repair."""
    try:
        weights.complete(final, part, staged)
    except weights.RepairError as exc:
        fail(
            msg=weights.repair_message(
                p["node"],
                p["repo"],
                p["revision"],
                exc.path,
                f"expected {exc.expected}, got {exc.got}",
                f"the mirror {p['endpoint']}",
            )
        )
    result.update(changed=True, files=staged["files"])
    module.exit_json(**result)


def _seal(module, p, final, part, info, files, result):
    """Write the manifest, move the staging directory into place and report the revision."""
    # The client's own bookkeeping inside the staging directory is ours to remove.
    shutil.rmtree(os.path.join(part, ".cache"), ignore_errors=True)
    manifest = {
        "repo": p["repo"],
        "revision": p["revision"],
        "commit": info.sha,
        "endpoint": p["endpoint"],
        "files": [{k: f[k] for k in ("path", "size", "sha256", "etag")} for f in files],
    }
    weights.write_json(os.path.join(part, weights.MANIFEST), manifest)
    os.rename(part, final)
    result.update(changed=True, files=manifest["files"])
    module.exit_json(**result)


def main():
    """Stage the pinned revision, or repair the staged copy, and report what was fetched."""
    module = AnsibleModule(
        argument_spec={
            "repo": {"type": "str", "required": True},
            "revision": {"type": "str", "required": True},
            "store": {"type": "path", "required": True},
            "endpoint": {"type": "str", "required": True},
            "token_file": {"type": "path"},
            "token_endpoints": {"type": "list", "elements": "str", "default": [], "no_log": False},
            "disable_xet": {"type": "bool", "default": True},
            "verify": {"type": "str", "choices": ["quick", "full"], "default": "quick"},
            "headroom_bytes": {"type": "int", "default": 0},
            "progress_file": {"type": "path"},
            "node": {"type": "str", "default": "this node"},
        },
        supports_check_mode=True,
    )
    p = module.params
    repo, revision, node = p["repo"], p["revision"], p["node"]
    error = weights.pin_error(f"revision of {repo}", revision)
    if error:
        module.fail_json(msg=f"{node}: {error}")
    final = weights.revision_dir(p["store"], repo, revision)
    part = weights.partial_dir(p["store"], repo, revision)
    result = {
        "changed": False,
        "commit": revision,
        "path": final,
        "downloaded": [],
        "downloaded_bytes": 0,
    }

    full = p["verify"] == "full"
    staged, bad = _staged_revision(module, final, repo, revision, full, result)
    # A repair: the revision directory keeps the files that verify and stays where the engine
    # loads it; what fails leaves it now, the replacements come through a fresh staging
    # directory that is removed whatever happens.
    repairing = staged is not None
    result["repaired"] = [b["path"] for b in bad]
    if repairing and not module.check_mode:
        weights.isolate(final, staged, [b["path"] for b in bad])
    fail = _failer(module, repo, revision, part, repairing, result)

    client = _client(p, result, fail)
    info, files, total = _list_files(p, client, result["token_sent"], fail)
    if repairing:
        # The revision's own manifest (sha256 of every file) is what a replacement must match.
        files = [dict(f) for f in staged["files"]]
    if module.check_mode:
        wanted = [b["size"] for b in bad] if repairing else [f["size"] for f in files]
        result.update(changed=True, files=files, downloaded_bytes=sum(wanted))
        module.exit_json(**result)

    todo, verified = _staging(final, part, staged, files, full)
    _download(p, part, todo, verified, total, client, repairing, result, fail)
    if repairing:
        _finish_repair(module, p, final, part, staged, result, fail)
    _seal(module, p, final, part, info, files, result)


if __name__ == "__main__":
    main()
