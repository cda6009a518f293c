"""A staged revision on a tmp store, and bit rot that keeps size and mtime (issue 21)."""

from __future__ import annotations

import hashlib
import json
import os

from ansible_collections.sparkfleet.serving.plugins.module_utils import _weights as w

REPO = "org/Model-1B"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
FILES = {
    "config.json": b'{"architectures": ["X"]}\n',
    "model-00001-of-00002.safetensors": bytes(range(256)) * 64,
    "model-00002-of-00002.safetensors": bytes(reversed(range(256))) * 64,
    "sub/tokenizer.json": b'{"v": 1}\n',
}


def manifest():
    return {
        "repo": REPO,
        "revision": COMMIT,
        "commit": COMMIT,
        "files": [
            {
                "path": path,
                "size": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
                "etag": hashlib.sha256(data).hexdigest(),
            }
            for path, data in sorted(FILES.items())
        ],
    }


def stage(store, mtime_ns=1_700_000_000_000_000_000):
    """A sealed, verified revision as the role leaves it (manifest and stat records)."""
    final = w.revision_dir(str(store), REPO, COMMIT)
    for path, data in FILES.items():
        full = os.path.join(final, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as handle:
            handle.write(data)
        os.utime(full, ns=(mtime_ns, mtime_ns))
    man = manifest()
    w.write_json(os.path.join(final, w.MANIFEST), man)
    w.write_json(
        os.path.join(final, w.VERIFIED),
        {
            e["path"]: dict(w.stat_record(os.path.join(final, e["path"])), sha256=e["sha256"])
            for e in man["files"]
        },
    )
    return final


def flip(path, offset=100):
    """Change bytes in place, keeping size, mtime and inode (bit rot, a bad copy tool)."""
    st = os.stat(path)
    with open(path, "r+b") as handle:
        handle.seek(offset)
        old = handle.read(4)
        handle.seek(offset)
        handle.write(bytes(b ^ 0xFF for b in old))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (
        st.st_size,
        st.st_mtime_ns,
        st.st_ino,
    )


def sha256(path):
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def leftovers(store):
    """Staging directories under the store (none may outlive a repair)."""
    return [n for _d, dirs, _f in os.walk(store) for n in dirs if n.endswith(".partial")]


def dump(obj):
    return json.dumps(obj, indent=1, sort_keys=True)
