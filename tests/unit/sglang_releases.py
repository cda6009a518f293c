"""Real SGLang release files for the unit tests.

``wheel(version)`` downloads the release wheel once with
``pip download --no-deps`` into ``<repo>/.cache/sglang-wheels/`` (or
``$SPARKFLEET_SGLANG_WHEELS``) and reuses it afterwards; ``read(version, member)``
and ``extract(version, root)`` take single files out of it. The wheel is pinned to
one tag set (CPython 3.11, manylinux x86_64 or pure Python) so that every host
tests the same bytes whatever its own interpreter.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CACHE = os.environ.get("SPARKFLEET_SGLANG_WHEELS") or os.path.join(REPO, ".cache", "sglang-wheels")

TOKENIZER_MANAGER = "sglang/srt/managers/tokenizer_manager.py"
WATCHDOG = "sglang/srt/utils/watchdog.py"
MEMBERS = (TOKENIZER_MANAGER, WATCHDOG)

# The releases the patch tests run against (0.5.x has no 0.5.0 on PyPI).
RELEASES = ("0.5.3", "0.5.7", "0.5.9", "0.5.12", "0.5.23")
# watchdog.py (and WatchdogRaw) first ships in this release.
WATCHDOG_SINCE = "0.5.7"

PIP_TAGS = (
    "--only-binary=:all:",
    "--python-version=3.11",
    "--implementation=cp",
    "--abi=cp311",
    "--abi=none",
    "--platform=manylinux_2_34_x86_64",
    "--platform=any",
)


def version_tuple(version):
    return tuple(int(part) for part in version.split("."))


def has_watchdog(version):
    return version_tuple(version) >= version_tuple(WATCHDOG_SINCE)


@contextlib.contextmanager
def _cache_lock():
    os.makedirs(CACHE, exist_ok=True)
    with open(os.path.join(CACHE, ".lock"), "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _cached(version):
    found = sorted(glob.glob(os.path.join(CACHE, f"sglang-{version}-*.whl")))
    return found[0] if found else None


def wheel(version):
    """Path of the sglang==version wheel, downloading it on first use."""
    path = _cached(version)
    if path:
        return path
    with _cache_lock():
        path = _cached(version)
        if path:
            return path
        work = tempfile.mkdtemp(prefix=".download-", dir=CACHE)
        try:
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet"]
            cmd += ["--disable-pip-version-check", *PIP_TAGS, "--dest", work]
            cmd.append(f"sglang=={version}")
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
            wheels = glob.glob(os.path.join(work, "sglang-*.whl"))
            if proc.returncode != 0 or len(wheels) != 1:
                raise RuntimeError(
                    f"pip download sglang=={version} failed (rc={proc.returncode}): "
                    f"{proc.stderr.strip()[-2000:]}"
                )
            path = os.path.join(CACHE, os.path.basename(wheels[0]))
            os.replace(wheels[0], path)
            return path
        finally:
            shutil.rmtree(work, ignore_errors=True)


def read(version, member):
    """Bytes of ``member`` (e.g. TOKENIZER_MANAGER) in the release, None if absent."""
    with zipfile.ZipFile(wheel(version)) as archive:
        try:
            return archive.read(member)
        except KeyError:
            return None


def read_text(version, member):
    data = read(version, member)
    return None if data is None else data.decode("utf-8")


def extract(version, root, members=MEMBERS):
    """Write the members the release has under ``root``; return {member: path}."""
    out = {}
    for member in members:
        data = read(version, member)
        if data is None:
            continue
        path = os.path.join(root, *member.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as handle:
            handle.write(data)
        out[member] = path
    return out
