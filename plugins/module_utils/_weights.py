# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Pure logic of weight staging: pins, the store layout, manifests, verification.

A staged revision lives in ``<store>/<org>--<repo>/<commit>/`` with the manifest
``.sparkfleet-manifest.json`` beside the files (repo, revision, commit, per-file size,
sha256 and the mirror's etag). While it is being filled it is called
``.<commit>.partial``; it is renamed into place only when every file is verified.
Each node keeps ``.sparkfleet-verified.json`` (size, mtime, inode of every file when it
was last hashed), so a re-run re-hashes only files whose stat changed.

Repair (a sealed revision whose files no longer verify): the corrupt copies leave the
revision directory at once (``isolate``), together with the Hugging Face cache blob that
is a hard link to the same inode, so nothing corrupt stays where the engine loads; the
replacements are staged in ``.<commit>.partial``, verified (sha256) and renamed in one by
one (``complete``); the staging directory is removed whether that succeeds or not. The
revision directory is never renamed away, so the engine's path never dangles and the
files that verify (and their hard links) are not touched.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
from urllib.parse import urlsplit

MANIFEST = ".sparkfleet-manifest.json"
VERIFIED = ".sparkfleet-verified.json"
COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
HEX64_RE = re.compile(r"^[0-9a-f]{64}$")
CHUNK = 8 * 1024 * 1024


def pin_error(var, value):
    """Why ``value`` is not a usable pin for ``var`` (None when it is one)."""
    if value is None or str(value).strip() == "":
        return f"{var} is not set; fix: pin it to the 40-character commit sha of the revision"
    text = str(value)
    if COMMIT_RE.match(text):
        return None
    if re.match(r"^[0-9a-fA-F]+$", text):
        return f"{var} {text!r} is not a full commit sha; fix: pin the full 40-character sha"
    return (
        f"{var} {text!r} is a branch or tag name, which moves; fix: pin the 40-character "
        "commit sha it points at"
    )


# The one endpoint the Hugging Face token is always sent to; any other (a mirror) only when
# the inventory lists it in sglang_hf_token_endpoints.
HF_HUB_ENDPOINT = "https://huggingface.co"
DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin(url):
    """(scheme, host, port) of ``url``; None when it is not an http(s) URL with a host."""
    try:
        parts = urlsplit(str(url).strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    return scheme, parts.hostname.lower().rstrip("."), port or DEFAULT_PORTS[scheme]


def hf_token_sent(endpoint, trusted=()):
    """Whether the Hugging Face token may be sent to ``endpoint``.

    Only to huggingface.co over https, or to an origin (scheme, host and port) the
    inventory lists in ``trusted`` (sglang_hf_token_endpoints); never to another mirror,
    whatever the profile's hf_endpoint says.
    """
    origin = _origin(endpoint)
    if origin is None:
        return False
    allowed = [_origin(HF_HUB_ENDPOINT)] + [_origin(t) for t in trusted or ()]
    return origin in allowed


def repo_key(repo):
    """Directory name of a repo in the store (``org--name``)."""
    return str(repo).replace("/", "--")


def hf_cache_dirname(repo):
    """Directory name of a model repo in the Hugging Face cache."""
    return "models--" + repo_key(repo)


def revision_dir(store, repo, commit):
    return os.path.join(store, repo_key(repo), commit)


def partial_dir(store, repo, commit):
    return os.path.join(store, repo_key(repo), f".{commit}.partial")


def git_blob_sha1(path):
    """The git blob id of a file (what the mirror's ETag carries for non-LFS files)."""
    digest = hashlib.sha1(f"blob {os.path.getsize(path)}\0".encode())
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def sha256_file(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def tree_entries(tree):
    """Files of a mirror tree listing as manifest entries.

    ``tree`` is the JSON of ``/api/models/<repo>/tree/<sha>?recursive=true`` (a list of
    dicts with type, path, size, oid and, for LFS files, lfs.oid/lfs.size) or the
    equivalent dicts built from huggingface_hub's RepoFile objects.
    """
    files = []
    for entry in tree or []:
        if entry.get("type", "file") != "file":
            continue
        lfs = entry.get("lfs") or {}
        sha256 = lfs.get("oid") or lfs.get("sha256")
        if sha256 and sha256.startswith("sha256:"):
            sha256 = sha256.split(":", 1)[1]
        files.append(
            {
                "path": entry["path"],
                "size": int(lfs.get("size") or entry.get("size") or 0),
                "sha256": sha256 or None,
                "git_oid": entry.get("oid") or entry.get("blob_id"),
                "etag": sha256 or entry.get("oid") or entry.get("blob_id"),
            }
        )
    return sorted(files, key=lambda f: f["path"])


def verify_file(path, entry):
    """(ok, expected, got) for a file against its manifest entry.

    With a sha256 in the entry (LFS files from the mirror, every file of a manifest)
    the file's sha256 must match. Without one (a small non-LFS file listed by the
    mirror, which gives only its git blob id) the git blob id must match, and the
    entry gains the file's sha256 for the manifest.
    """
    if not os.path.isfile(path):
        return False, entry.get("sha256") or entry.get("git_oid"), "missing"
    size = os.path.getsize(path)
    if entry.get("size") is not None and size != int(entry["size"]):
        return False, f"{entry['size']} bytes", f"{size} bytes"
    if entry.get("sha256"):
        got = sha256_file(path)
        return got == entry["sha256"], f"sha256 {entry['sha256']}", f"sha256 {got}"
    got = git_blob_sha1(path)
    if got != entry.get("git_oid"):
        return False, f"git blob {entry.get('git_oid')}", f"git blob {got}"
    entry["sha256"] = sha256_file(path)
    return True, f"git blob {got}", f"git blob {got}"


def stat_record(path):
    st = os.stat(path)
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ino": st.st_ino}


def stat_records(root, files):
    """{path: stat record} of the manifest entries present as files under root."""
    out = {}
    for entry in files:
        path = os.path.join(root, entry["path"])
        if os.path.isfile(path):
            out[entry["path"]] = stat_record(path)
    return out


def same_stat(a, b):
    """True when two stat records (size, mtime_ns, inode) describe the same file state."""
    keys = ("size", "mtime_ns", "ino")
    return bool(a) and bool(b) and all(a.get(k) == b.get(k) for k in keys)


def files_to_rehash(manifest, verified, stats, full=False):
    """Manifest paths whose stat differs from the last verification (all when full)."""
    out = []
    for entry in manifest.get("files", []):
        path = entry["path"]
        if full or not same_stat(stats.get(path), verified.get(path)):
            out.append(path)
    return out


def check_revision(root, manifest, full=False):
    """(bad entries, verified records, rehashed?) of a directory against a manifest.

    ``full`` re-hashes every file; otherwise only files whose stat differs from the
    records in ``root``'s verified file. A bad entry is ``{path, expected, got, size}``;
    ``got`` is ``missing`` for a file that is not there.
    """
    verified = load_json(os.path.join(root, VERIFIED)) or {}
    stats = stat_records(root, manifest["files"])
    todo = set(files_to_rehash(manifest, verified, stats, full))
    bad = []
    for entry in manifest["files"]:
        if entry["path"] not in todo:
            continue
        ok, expected, got = verify_file(os.path.join(root, entry["path"]), dict(entry))
        if ok:
            verified[entry["path"]] = dict(stats[entry["path"]], sha256=entry["sha256"])
        else:
            verified.pop(entry["path"], None)
            bad.append(
                {"path": entry["path"], "expected": expected, "got": got, "size": entry["size"]}
            )
    return bad, verified, bool(todo)


def file_states(manifest, bad):
    """One row per manifest file: ``{path, state}`` with state ok, corrupt or missing."""
    why = {b["path"]: b for b in bad or []}
    rows = []
    for entry in (manifest or {}).get("files", []):
        b = why.get(entry["path"])
        if b is None:
            rows.append({"path": entry["path"], "state": "ok"})
        else:
            state = "missing" if b.get("got") == "missing" else "corrupt"
            rows.append(
                {
                    "path": entry["path"],
                    "state": state,
                    "expected": b.get("expected"),
                    "got": b.get("got"),
                }
            )
    return rows


def missing_entries(root, manifest):
    """Manifest entries that are not a file under ``root`` (what a repair must bring)."""
    return [
        entry
        for entry in manifest["files"]
        if not os.path.isfile(os.path.join(root, entry["path"]))
    ]


def hf_blob_path(hf_hub, repo, etag):
    """Where model_weights_publish puts a file of ``repo`` in the Hugging Face cache."""
    return os.path.join(hf_hub, hf_cache_dirname(repo), "blobs", etag)


def isolate(root, manifest, paths, hf_hub=None, check=False):
    """Take the listed files out of a sealed revision when they still fail verification.

    Each listed file is hashed again (only these: the caller found them bad) and, when it
    still fails, unlinked from ``root``; a Hugging Face cache blob of ``manifest['repo']``
    under ``hf_hub`` that is the same inode (a hard link made by publish) goes with it,
    so the engine loads neither. A file that verifies now is kept. The verified records of
    ``root`` drop what was removed. Returns ``(removed, kept)`` lists of paths (in check
    mode: what would be removed).
    """
    entries = {e["path"]: e for e in manifest["files"]}
    removed, kept = [], []
    verified = load_json(os.path.join(root, VERIFIED)) or {}
    for path in paths:
        entry = entries.get(path)
        full = os.path.join(root, path)
        if entry is None or not os.path.isfile(full):
            continue
        ok, _expected, _got = verify_file(full, dict(entry))
        if ok:
            kept.append(path)
            continue
        removed.append(path)
        if check:
            continue
        st = os.stat(full)
        if hf_hub and entry.get("etag"):
            blob = hf_blob_path(hf_hub, manifest.get("repo", ""), entry["etag"])
            try:
                bst = os.stat(blob)
            except OSError:
                bst = None
            if bst is not None and (bst.st_dev, bst.st_ino) == (st.st_dev, st.st_ino):
                os.unlink(blob)
        os.unlink(full)
        verified.pop(path, None)
    if removed and not check:
        write_json(os.path.join(root, VERIFIED), verified)
    return removed, kept


def hand_over(root, uid, gid, files=True):
    """Give ``root`` (its directories, and its files when ``files``) to uid:gid, links not
    followed. A peer's rsync writing as a user that is not root gets the staging
    directories (new files only: a repair's hard links to placed files stay root's); the
    store takes all of it back before anything is verified, so nothing verified can be
    changed by that user afterwards."""
    for dirpath, _dirnames, filenames in os.walk(root):
        os.lchown(dirpath, uid, gid)
        if files:
            for name in filenames:
                os.lchown(os.path.join(dirpath, name), uid, gid)


def link_present(final, part, manifest):
    """Hard-link every manifest file ``final`` has into the empty staging directory ``part``.

    The head's rsync of the whole revision into ``part`` then skips them (same size and
    mtime: the head sent them before) and sends only what ``final`` lacks; a file it does
    send is written beside the link and renamed over it, so ``final``'s copy is never
    written. A file that cannot be linked (another filesystem) is simply sent again.
    """
    for entry in manifest["files"]:
        source = os.path.join(final, entry["path"])
        if not os.path.isfile(source):
            continue
        target = os.path.join(part, entry["path"])
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with contextlib.suppress(OSError):
            os.link(source, target)


class RepairError(Exception):
    """A replacement is missing or does not verify; ``path`` names the file."""

    def __init__(self, path, expected, got):
        super().__init__(f"{path}: expected {expected}, got {got}")
        self.path, self.expected, self.got = path, expected, got


def complete(final, part, manifest):
    """Move every file ``final`` lacks from ``part`` into ``final``, each verified first.

    All replacements are hashed (sha256) before the first one moves, so a bad one leaves
    ``final`` as it was; each move is a rename on one filesystem (atomic per file). The
    staging directory ``part`` is removed in every case, so no ``.partial`` outlives the
    call. Returns the paths placed; raises RepairError naming the first file that is
    missing or fails.
    """
    try:
        todo = missing_entries(final, manifest)
        records = {}
        for entry in todo:
            source = os.path.join(part, entry["path"])
            ok, expected, got = verify_file(source, dict(entry))
            if not ok:
                raise RepairError(entry["path"], expected, got)
            records[entry["path"]] = entry
        verified = load_json(os.path.join(final, VERIFIED)) or {}
        for entry in todo:
            target = os.path.join(final, entry["path"])
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.replace(os.path.join(part, entry["path"]), target)
            verified[entry["path"]] = dict(stat_record(target), sha256=entry["sha256"])
        if todo:
            write_json(os.path.join(final, VERIFIED), verified)
        return [e["path"] for e in todo]
    finally:
        shutil.rmtree(part, ignore_errors=True)


def repair_message(node, repo, commit, path, why, source):
    """Error text of a repair that failed: host, file, state of the node, and the fix."""
    return (
        f"{node}: repairing {repo}@{commit} failed at {path}: {why}; the corrupt copy was "
        "taken out of the engine's path (a restart cannot load it) and no staging directory "
        f"was left; fix: make {source} serve a good copy, then run "
        "ansible-playbook sparkfleet.serving.verify -i <inventory> -e repair=true (or "
        "ansible-playbook sparkfleet.serving.site -i <inventory> -e model_weights_verify=full)"
    )


def scrub_rows(node, results):
    """Rows of one node's scrub from its ``model_weights_store`` info results (one per revision)."""
    rows = []
    for result in results or []:
        item = result.get("item") or {}
        base = {"node": node, "repo": item.get("repo", "?"), "commit": str(item.get("commit", "?"))}
        if result.get("files"):
            rows.extend(dict(base, **row) for row in result["files"])
        elif result.get("status") == "corrupt":
            rows.append(dict(base, path="(no usable manifest)", state="corrupt"))
        else:
            rows.append(dict(base, path="(revision not staged)", state="absent"))
    return rows


def scrub_lines(rows, repair=False):
    """The operator's report of a scrub: one line per node, file and revision, then totals.

    ``rows``: dicts with node, repo, commit, path, state (ok, corrupt, missing, absent) and,
    for a corrupt file, expected and got.
    """
    width = max([len(r["node"]) for r in rows] + [4])
    pwidth = max([len(r["path"]) for r in rows] + [4])
    lines = [f"{'node':<{width}}  {'state':<7}  {'file':<{pwidth}}  revision"]
    counts = {}
    for r in rows:
        counts[r["state"]] = counts.get(r["state"], 0) + 1
        state = r["state"] if r["state"] == "ok" else r["state"].upper()
        revision = f"{r['repo']}@{r['commit'][:12]}"
        line = f"{r['node']:<{width}}  {state:<7}  {r['path']:<{pwidth}}  {revision}"
        if r["state"] == "corrupt" and r.get("got"):
            line += f"  (expected {r.get('expected')}, got {r.get('got')})"
        lines.append(line)
    nodes = len({r["node"] for r in rows})
    total = ", ".join(
        f"{counts[k]} {k}" for k in ("ok", "corrupt", "missing", "absent") if k in counts
    )
    bad = sum(counts.get(k, 0) for k in ("corrupt", "missing"))
    lines.append(f"{len(rows)} files on {nodes} nodes: {total or 'nothing staged'}")
    if bad and repair:
        lines.append("repairing the corrupt and missing files now (repair=true)")
    elif bad:
        lines.append(
            "nothing was changed; repair with: "
            "ansible-playbook sparkfleet.serving.verify -i <inventory> -e repair=true"
        )
    if counts.get("absent"):
        lines.append("a revision that is not staged is staged by site.yml, not by the scrub")
    return lines


def manifest_matches(manifest, repo, commit):
    """Error text when a manifest does not describe repo@commit (None when it does)."""
    if not isinstance(manifest, dict):
        return "no readable manifest"
    if manifest.get("repo") != repo:
        return f"manifest names repo {manifest.get('repo')!r}, not {repo!r}"
    if manifest.get("commit") != commit:
        return f"manifest names commit {manifest.get('commit')!r}, not {commit!r}"
    if not isinstance(manifest.get("files"), list) or not manifest["files"]:
        return "manifest lists no files"
    return None


def mismatch_message(node, repo, path, expected, got):
    return (
        f"{node}: {repo}/{path} failed verification: expected {expected}, got {got}; "
        "the bad copy was removed from the staging directory (the engine never loads it)"
    )


def disk_error(node, where, needed, free, headroom=0):
    """Error text when ``free`` bytes at ``where`` cannot hold ``needed`` (+headroom)."""
    if needed + headroom <= free:
        return None
    return (
        f"{node}: {where} has {human(free)} free, staging the weights needs {human(needed)}"
        + (f" plus {human(headroom)} headroom" if headroom else "")
        + "; fix: free space there or point model_path at a larger filesystem"
    )


def human(count):
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{count} B"


def container_to_host(path, volumes):
    """Host path of a container path through the profile's ``-v host:container[:opts]``.

    The longest matching container mount wins; None when no volume holds the path.
    """
    if not path or not str(path).startswith("/"):
        return None
    best = None
    for volume in volumes or []:
        parts = str(volume).split(":")
        if len(parts) < 2:
            continue
        host, inside = parts[0], parts[1].rstrip("/") or "/"
        inside_it = path == inside or path.startswith(inside.rstrip("/") + "/")
        if inside_it and (best is None or len(inside) > len(best[1])):
            best = (host.rstrip("/") or "/", inside)
    if best is None:
        return None
    rest = path[len(best[1]) :].lstrip("/")
    return os.path.join(best[0], rest) if rest else best[0]


def mount_root(path, volumes):
    """(host mount root, container mount root) of the volume that holds ``path``."""
    best = None
    for volume in volumes or []:
        parts = str(volume).split(":")
        if len(parts) < 2:
            continue
        inside = parts[1].rstrip("/") or "/"
        inside_it = path == inside or str(path).startswith(inside.rstrip("/") + "/")
        if inside_it and (best is None or len(inside) > len(best[1])):
            best = (parts[0].rstrip("/") or "/", inside)
    return best


def progress_line(done, total, rate, elapsed):
    pct = 100.0 * done / total if total else 100.0
    eta = (total - done) / rate if rate > 0 else None
    return (
        f"{pct:5.1f}% {human(done)} of {human(total)} at {human(rate)}/s"
        + (f", about {int(eta)} s left" if eta is not None else "")
        + f" ({int(elapsed)} s so far)"
    )


def load_json(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def write_json(path, data):
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2, sort_keys=True)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def xet_hint(error_text, disable_xet):
    """The operator's fix when a download failed the way seed Pitfall 7 did."""
    text = str(error_text)
    if disable_xet:
        return None
    if "401" in text or "xet" in text.lower():
        return (
            "the mirror advertises Xet storage and its Xet route refused the client (seed "
            "Pitfall 7); set HF_HUB_DISABLE_XET=1 (profile field hf_disable_xet: true)"
        )
    return None


HF_HOME_IN_CONTAINER = "/root/.cache/huggingface"
STORE_NAME = ".sparkfleet-weights"


def plan(engine, hf_home_in_container=HF_HOME_IN_CONTAINER):
    """What to stage for an engine profile: (items, errors).

    Items: the main model (``model_repo`` at ``model_revision``, published at the host side
    of ``model_path``, plus the chat template when the profile mounts one that the repo
    carries: ``template_name``), and the speculative draft when it is a hub repo id
    (published in the Hugging Face cache the container mounts). Errors name the variable
    and the fix.
    """
    errors, items = [], []
    volumes = (engine.get("container") or {}).get("volumes") or []
    model_path = engine.get("model_path")
    root = mount_root(model_path, volumes) if model_path else None
    if not engine.get("model_repo"):
        errors.append(
            "sglang_engine.model_repo is empty; fix: set the repo id in sglang_profile_overrides"
        )
    if root is None:
        errors.append(
            f"sglang_engine.model_path {model_path!r} is not under any of the profile's container "
            "volumes; fix: mount its directory (container.volumes) so the node's copy is what "
            "the engine reads"
        )
    error = pin_error("sglang_engine.model_revision", engine.get("model_revision"))
    if error:
        errors.append(error)
    store = os.path.join(root[0], STORE_NAME) if root else None
    template = engine.get("chat_template")
    template_host = container_to_host(template, volumes) if template else None
    if root:
        items.append(
            {
                "name": "model",
                "repo": engine.get("model_repo"),
                "commit": engine.get("model_revision"),
                "link": container_to_host(model_path, volumes),
                "hf_hub": None,
                "template_name": os.path.basename(template) if template_host else None,
                "template_dest": template_host,
            }
        )
    spec = engine.get("speculative") or {}
    draft = spec.get("draft_model_path")
    if draft and not str(draft).startswith(("/", ".", "~")):
        hf_home = container_to_host(hf_home_in_container, volumes)
        error = pin_error(
            "sglang_engine.speculative.draft_model_revision", spec.get("draft_model_revision")
        )
        if error:
            errors.append(error)
        if hf_home is None:
            errors.append(
                f"the profile mounts no Hugging Face cache at {hf_home_in_container}; fix: add a "
                f"volume HOST_DIR:{hf_home_in_container} to container.volumes so the staged draft "
                "model is found offline"
            )
        else:
            items.append(
                {
                    "name": "draft",
                    "repo": draft,
                    "commit": spec.get("draft_model_revision"),
                    "link": None,
                    "hf_hub": os.path.join(hf_home, "hub"),
                    "template_name": None,
                    "template_dest": None,
                }
            )
    return {"store": store, "stage": items, "errors": errors}
