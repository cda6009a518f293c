"""Run on a twin node (python3 - ARGS < this file): flip bytes keeping size and mtime, or check.

flip PATH_GLOB: xor 4 bytes at offset 4096 of the one file the glob names, then put its
  mtime back (bit rot, a bad copy tool); prints {path, before, after} stats as JSON.
check STORE: every revision under STORE that has a manifest: each file's sha256 against the
  manifest, and any staging directory (.partial) or file the manifest does not list in the
  revision directory; prints {bad: [...], partial: [...], extra: [...]} as JSON.
"""

import glob
import hashlib
import json
import os
import sys


def stat(path):
    st = os.stat(path)
    return [st.st_size, st.st_mtime_ns, st.st_ino]


def flip(pattern):
    (path,) = glob.glob(pattern)
    before = stat(path)
    with open(path, "r+b") as handle:
        handle.seek(4096)
        data = handle.read(4)
        handle.seek(4096)
        handle.write(bytes(b ^ 0x5A for b in data))
    os.utime(path, ns=(before[1], before[1]))
    return {"path": path, "before": before, "after": stat(path)}


def check(store):
    out = {"bad": [], "partial": [], "extra": [], "revisions": 0}
    for repo in sorted(os.listdir(store)):
        for name in sorted(os.listdir(os.path.join(store, repo))):
            root = os.path.join(store, repo, name)
            if name.endswith(".partial"):
                out["partial"].append(root)
                continue
            try:
                with open(os.path.join(root, ".sparkfleet-manifest.json"), encoding="utf-8") as h:
                    files = json.load(h)["files"]
            except (OSError, ValueError, KeyError):
                continue
            out["revisions"] += 1
            listed = {f["path"] for f in files}
            for f in files:
                path = os.path.join(root, f["path"])
                try:
                    with open(path, "rb") as h:
                        got = hashlib.sha256(h.read()).hexdigest()
                except OSError:
                    got = "missing"
                if got != f["sha256"]:
                    out["bad"].append(f"{repo}/{name}/{f['path']}: {got}")
            for dirpath, _dirs, names in os.walk(root):
                for n in names:
                    rel = os.path.relpath(os.path.join(dirpath, n), root)
                    if rel not in listed and not rel.startswith(".sparkfleet-"):
                        out["extra"].append(f"{repo}/{name}/{rel}")
    return out


if __name__ == "__main__":
    verb, arg = sys.argv[1], sys.argv[2]
    print(json.dumps(flip(arg) if verb == "flip" else check(arg)))
