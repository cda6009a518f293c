"""Load real upstream SGLang files without the rest of SGLang.

``tokenizer_manager.py`` and ``watchdog.py`` are imported through Python's normal
import system (so bytecode caching, ``__pycache__`` and ``--check-hash-based-pycs``
behave exactly as in the real engine). Every other module they import, SGLang
siblings and third-party packages alike, is served by a stub finder on
``sys.meta_path``: attribute access on a stub yields inert objects that can be
subclassed, called, used as decorators, subscripted in annotations and compared.

Used by the engine stand-in image and by the unit tests of the patch engine.
Standard library only.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import signal
import sys
import types

SGLANG_PYTHON_ROOT = "/sgl-workspace/sglang/python"
TOKENIZER_MANAGER = "sglang.srt.managers.tokenizer_manager"
WATCHDOG = "sglang.srt.utils.watchdog"
REAL_MODULES = (TOKENIZER_MANAGER, WATCHDOG)


class _StubMeta(type):
    """Metaclass of stub classes: class-level attribute access never fails."""

    def __getattr__(cls, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _make_stub(f"{cls.__qualname__}.{name}")

    def __getitem__(cls, item):
        return cls

    def __or__(cls, other):
        return cls

    def __ror__(cls, other):
        return cls

    def __iter__(cls):
        return iter(())

    def __len__(cls):
        return 0

    def __bool__(cls):
        return True


class _Stub(metaclass=_StubMeta):
    """Inert object: falsy, zero-valued, callable, decorates as identity."""

    def __init_subclass__(cls, **kwargs):
        # msgspec.Struct-style subclasses pass keyword arguments here.
        super().__init_subclass__()

    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and not kwargs and callable(args[0]):
            return args[0]
        return _Stub()

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Stub()

    def __bool__(self):
        return False

    def __int__(self):
        return 0

    def __index__(self):
        return 0

    def __float__(self):
        return 0.0

    def __len__(self):
        return 0

    def __iter__(self):
        return iter(())

    def __contains__(self, item):
        return False

    def __getitem__(self, item):
        return _Stub()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        return False

    def __lt__(self, other):
        return False

    __le__ = __gt__ = __ge__ = __lt__

    def __eq__(self, other):
        return other is self

    def __hash__(self):
        return id(self)

    def __add__(self, other):
        return other

    __radd__ = __add__

    def __repr__(self):
        return f"<stub {type(self).__qualname__}>"


def _make_stub(qualname):
    """A fresh stub class: usable as a base, a type hint, a decorator or a value."""
    name = qualname.rsplit(".", 1)[-1] or "Stub"
    return _StubMeta(name, (_Stub,), {"__qualname__": qualname, "__module__": "sparksim.stub"})


class _StubModule(types.ModuleType):
    """A module (and package) whose every attribute is a stub class."""

    def __init__(self, name):
        super().__init__(name)
        self.__path__ = []
        self.__file__ = f"<sparksim stub {name}>"

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        value = _make_stub(f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value


def kill_process_tree(parent_pid, include_parent=True, skip_pid=None):
    """Kill a process and all its descendants (SGLang's helper, reimplemented)."""
    children = _descendants(parent_pid)
    for pid in children:
        if pid != skip_pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    if include_parent:
        with contextlib.suppress(ProcessLookupError):
            os.kill(parent_pid, signal.SIGKILL)


def _descendants(pid):
    """All descendants of ``pid``, read from /proc (children before grandchildren)."""
    by_parent = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as handle:
                stat = handle.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        by_parent.setdefault(ppid, []).append(int(entry))
    out, queue = [], [pid]
    while queue:
        for child in by_parent.get(queue.pop(0), []):
            out.append(child)
            queue.append(child)
    return out


class _Process:
    """The slice of ``psutil.Process`` that SGLang's watchdog uses."""

    def __init__(self, pid=None):
        self.pid = os.getpid() if pid is None else pid

    def parent(self):
        with open(f"/proc/{self.pid}/stat", encoding="ascii", errors="replace") as handle:
            ppid = int(handle.read().rsplit(")", 1)[1].split()[1])
        return _Process(ppid)

    def send_signal(self, sig):
        os.kill(self.pid, sig)

    def children(self, recursive=False):
        pids = (
            _descendants(self.pid)
            if recursive
            else [p for p in _descendants(self.pid) if _Process(p).parent().pid == self.pid]
        )
        return [_Process(p) for p in pids]

    def kill(self):
        os.kill(self.pid, signal.SIGKILL)


def _special_module(name):
    """Working stand-ins for the few names whose behaviour matters."""
    if name == "psutil":
        module = _StubModule(name)
        module.Process = _Process
        module.NoSuchProcess = ProcessLookupError
        return module
    if name == "uvloop":
        module = _StubModule(name)
        module.EventLoopPolicy = asyncio.DefaultEventLoopPolicy
        module.new_event_loop = asyncio.new_event_loop
        module.install = lambda: None
        return module
    module = _StubModule(name)
    if name == "sglang.srt.utils" or name == "sglang.srt.utils.common":
        module.kill_process_tree = kill_process_tree
        module.pyspy_dump_schedulers = _pyspy_dump_schedulers
    return module


def _pyspy_dump_schedulers():
    # The real helper shells out to py-spy; in the seed's image it fails
    # ("Failed to copy Py_Version"), which is why the stack-dump patch exists.
    import logging

    logging.getLogger("sglang.srt.utils.common").error(
        "py-spy dump failed: Error: Failed to copy Py_Version"
    )


class StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serve the real upstream files from ``root`` and stubs for everything else."""

    def __init__(self, root, real_modules=REAL_MODULES):
        self.root = root
        self.real = {}
        for fullname in real_modules:
            path = os.path.join(root, *fullname.split(".")) + ".py"
            if os.path.exists(path):
                self.real[fullname] = path
        self.parents = set()
        for fullname in self.real:
            parts = fullname.split(".")
            for i in range(1, len(parts)):
                self.parents.add(".".join(parts[:i]))

    def _stubbed(self, fullname):
        top = fullname.split(".", 1)[0]
        if fullname in self.real:
            return False
        if top == "sglang":
            return True
        return not (top in sys.stdlib_module_names or top in ("sparksim", "_pytest", "pytest"))

    def find_spec(self, fullname, path=None, target=None):
        if fullname in self.real:
            # Normal source loader: honours __pycache__ and the pyc invalidation mode.
            return importlib.util.spec_from_file_location(fullname, self.real[fullname])
        if self._stubbed(fullname):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        return _special_module(spec.name)

    def exec_module(self, module):
        return None


def install(root=SGLANG_PYTHON_ROOT):
    """Put a StubFinder for ``root`` first on sys.meta_path; return it."""
    for finder in sys.meta_path:
        if isinstance(finder, StubFinder):
            sys.meta_path.remove(finder)
    finder = StubFinder(root)
    sys.meta_path.insert(0, finder)
    return finder


def uninstall():
    """Remove the finder and every module it served (for tests that load twice)."""
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, StubFinder)]
    for name in list(sys.modules):
        if name == "sglang" or name.startswith("sglang.") or name in ("uvloop",):
            del sys.modules[name]


def _load_real(name, root):
    finder = install(root)
    if name not in finder.real:
        raise ModuleNotFoundError(
            f"{name} is not part of this SGLang release (looked under {root})", name=name
        )
    return importlib.import_module(name)


def load_tokenizer_manager(root=SGLANG_PYTHON_ROOT):
    """Import the real tokenizer_manager.py under ``root``."""
    return _load_real(TOKENIZER_MANAGER, root)


def load_watchdog(root=SGLANG_PYTHON_ROOT):
    """Import the real watchdog.py under ``root`` (SGLang 0.5.7 and later)."""
    return _load_real(WATCHDOG, root)


class _Args:
    """server_args / model_config: known values, None for everything else."""

    def __init__(self, **values):
        self.__dict__.update(values)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return None


def make_validator(module, context_len, allow_auto_truncate=False):
    """A TokenizerManager shell on which the real _validate_one_request can run.

    Only the attributes the validation reads across 0.5.x are set; the class'
    own methods (and its stub mixins) provide the rest.
    """
    cls = module.TokenizerManager
    tm = cls.__new__(cls)
    values = {
        "context_len": context_len,
        "num_reserved_tokens": 0,
        "reserve_input_token_num": 0,
        "validate_total_tokens": True,
        "allow_auto_truncate": allow_auto_truncate,
        "is_generation": True,
        "model_config": _Args(context_len=context_len),
        "server_args": _Args(
            allow_auto_truncate=allow_auto_truncate,
            enable_return_hidden_states=False,
            enable_custom_logit_processor=False,
            limit_mm_data_per_request=None,
        ),
    }
    for key, value in values.items():
        object.__setattr__(tm, key, value)
    return tm


def make_request(module, sampling_params, rid="req-0"):
    """A GenerateReqInput-typed request carrying ``sampling_params`` (a dict).

    Like the real dataclass, every field it does not set reads as None.
    """
    cls = _StubMeta(
        "GenerateReqInput",
        (module.GenerateReqInput,),
        {"__getattr__": lambda self, name: None, "__bool__": lambda self: True},
    )
    req = cls()
    req.sampling_params = sampling_params
    req.rid = rid
    req.return_hidden_states = False
    return req
