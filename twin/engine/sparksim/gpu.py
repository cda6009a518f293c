"""The simulated GPU, and the release's own SM12x gate run against it.

A real DeepSeek-V4 launch on Blackwell consults the SGLang release's
``is_sm120()`` (``srt/utils/common.py``). In releases that have it (0.5.23), it
is an exact ``get_device_capability() == (12, 0)`` check, which GB10 (DGX Spark,
compute capability (12, 1)) fails: seed 000's operators had to widen it to the
SM12x family. The stand-in reads the file mounted at the image path (the
original, or the ``sm12x_gate`` patch of sparkfleet.serving), compiles only the
gate functions from its real source and calls them with ``torch.cuda`` answering
the simulated capability. Standard library only: the rest of common.py (torch,
triton, numpy...) is never imported.
"""

from __future__ import annotations

import ast
import os
import types

COMMON = "/sgl-workspace/sglang/python/sglang/srt/utils/common.py"
GATE = "is_sm120"
# Helpers the gate may call, compiled from the same file when present.
HELPERS = ("is_cuda",)
DS4_ARCHITECTURES = ("DeepseekV4ForCausalLM", "DeepseekV4ForCausalLMNextN")


def capability(environ=None):
    """The simulated compute capability, e.g. (12, 1), or None (no GPU simulated)."""
    value = (environ if environ is not None else os.environ).get("SPARKSIM_DEVICE_CAPABILITY")
    if not value:
        return None
    major, _, minor = value.strip().partition(".")
    return int(major), int(minor or 0)


def is_deepseek_v4(config):
    """True when a model config.json names a DeepSeek-V4 architecture."""
    archs = config.get("architectures") or []
    return any(str(a) in DS4_ARCHITECTURES for a in archs) or config.get("model_type") in (
        "deepseek_v4",
    )


def _torch(cap):
    cuda = types.SimpleNamespace(
        is_available=lambda: True,
        get_device_capability=lambda device=None: cap,
    )
    return types.SimpleNamespace(cuda=cuda, version=types.SimpleNamespace(cuda="13.0"))


def sm120_gate(cap, path=COMMON):
    """Run the release's is_sm120() on ``cap``: True/False, or None when it has no gate."""
    try:
        with open(path, encoding="utf-8") as handle:
            source = handle.read()
    except FileNotFoundError:
        return None
    tree = ast.parse(source, filename=path)
    wanted = {GATE, *HELPERS}
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in wanted]
    if GATE not in {f.name for f in funcs}:
        return None
    for func in funcs:
        func.decorator_list = []  # lru_cache: irrelevant for one call
        func.returns = None
    module = ast.Module(body=funcs, type_ignores=[])
    namespace = {"torch": _torch(cap)}
    exec(compile(module, path, "exec"), namespace)
    return bool(namespace[GATE]())
