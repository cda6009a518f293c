"""The twin's nodes only: keep the bytecode of what Python imports from a zip archive.

Ansible runs every module as an AnsiballZ payload, a zip archive that Python imports from
with zipimport, which compiles every source file it loads on every run (it never writes
bytecode, as it does for files on disk). On the twin's nodes, which share the machine's
two cores with the controller, that compiling is about a third of a module run's CPU time.
This keeps each compiled module under the hash of its source and the interpreter's magic
number, read back on the next run: the code run is the same, only the compiling is saved.
Loaded at every interpreter start by a .pth file (twin/images/node/Dockerfile); a rack's
nodes do not have it (README, the twin and a rack).
"""

import zipimport

CACHE = "/var/cache/sparksim-pyc"
_compile_source = zipimport._compile_source


def _compile_cached(pathname, source):
    # Imported here, not at start: every interpreter on the node loads this file, most
    # never import from a zip archive (measured: 10 ms per start with them at the top).
    import contextlib
    import hashlib
    import importlib.util
    import marshal
    import os

    key = hashlib.sha256(importlib.util.MAGIC_NUMBER + source).hexdigest()
    path = os.path.join(CACHE, key)
    try:
        with open(path, "rb") as f:
            return marshal.load(f)
    except (OSError, EOFError, ValueError, TypeError):
        pass
    code = _compile_source(pathname, source)
    # Written by whoever may (root: the directory is root's, 0755); another user compiles
    # for itself and reads what root wrote. Renamed in whole: a reader never sees half.
    tmp = f"{path}.{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            marshal.dump(code, f)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    return code


zipimport._compile_source = _compile_cached
