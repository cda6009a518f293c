#!/usr/bin/env python3
"""Extract what the engine image needs from an SGLang wheel (runs on the host).

Writes, under OUT:

    sglang/srt/managers/tokenizer_manager.py   the real file of that release
    sglang/srt/utils/watchdog.py               the real file (SGLang >= 0.5.7 only)
    sglang/srt/utils/common.py                 the real file, when the release has it
                                               (its is_sm120() gate, read by sparksim.gpu)
    sglang/flags.json                          every `--flag` of the release's
                                               server_args.py (and arg_groups/), read
                                               statically

The releases declare their flags in three layouts, all read: ``parser.add_argument("--x",
...)`` in server_args.py (up to 0.5.12); annotated fields of the ServerArgs dataclass in
server_args.py, ``name: A[type, "help" | Arg(...)(, NS("group"))] = default`` (0.5.13 to
0.5.1x); the same fields in namespace classes under arg_groups/ (0.5.2x). The declarations
are also counted on their own (``declarations``): fewer flags read than MIN_READ of them
fails the extraction (a layout this file does not read yet), and with it the image build.

Each extracted file keeps the modification time recorded in the wheel, so the
timestamp-mode .pyc compiled from it is the same on every build.
Standard library only.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
import time
import zipfile

FILES = {
    "sglang/srt/managers/tokenizer_manager.py": True,  # required
    "sglang/srt/utils/watchdog.py": False,  # absent before 0.5.7
    # Holds is_sm120() (the exact (12, 0) gate of seed 000) in releases that have it.
    "sglang/srt/utils/common.py": False,
}
SERVER_ARGS = "sglang/srt/server_args.py"
# SGLang >= 0.5.2x declares most flags as annotated fields of namespace classes here
# (``name: A[type, "help" | Arg(...)] = default``, see arg_groups/arg_utils.py).
ARG_FIELDS = "sglang/srt/arg_groups/"
# Field metadata that is not a flag's (arg_utils: a namespace, a derived value).
NON_CLI = ("NS", "Derived")
# Fewer flags read than this share of the declarations counted fails the extraction.
MIN_READ = 0.9


def _literal(node, defaults):
    """A JSON-able constant for an AST node, or None when it is not one."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float, bool)):
        return node.value
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "ServerArgs"
    ):
        return defaults.get(node.attr)
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_literal(elt, defaults) for elt in node.elts]
        return items if all(item is not None for item in items) else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _literal(node.operand, defaults)
        return -value if isinstance(value, (int, float)) else None
    return None


def _dataclass_defaults(tree):
    """Constant field defaults of the ServerArgs dataclass."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "ServerArgs":
            out = {}
            for stmt in node.body:
                if (
                    isinstance(stmt, ast.AnnAssign)
                    and isinstance(stmt.target, ast.Name)
                    and stmt.value is not None
                ):
                    value = _literal(stmt.value, {})
                    if value is not None:
                        out[stmt.target.id] = value
            return out
    return {}


def server_flags(source):
    """Every add_argument("--x", ...) of server_args.py as a JSON-able dict."""
    tree = ast.parse(source)
    defaults = _dataclass_defaults(tree)
    flags = []
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_argument"
        ):
            continue
        names = [a.value for a in node.args if isinstance(a, ast.Constant)]
        if not names or not all(isinstance(n, str) and n.startswith("--") for n in names):
            continue
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        action = kw.get("action")
        if isinstance(action, ast.Constant):
            kind = action.value
        elif isinstance(action, ast.Name) and action.id == "DeprecatedAction":
            kind = "deprecated"
        elif isinstance(action, ast.Name) and action.id.endswith("StoreTrueAction"):
            kind = "store_true"  # e.g. 0.5.23's DeprecatedStoreTrueAction
        else:
            kind = "store"
        type_node = kw.get("type")
        type_name = type_node.id if isinstance(type_node, ast.Name) else None
        flag = {
            "names": names,
            "dest": _literal(kw["dest"], {}) if "dest" in kw else None,
            "action": kind,
            "type": type_name if type_name in ("int", "float") else "str",
            "nargs": _literal(kw["nargs"], {}) if "nargs" in kw else None,
            "choices": _literal(kw["choices"], defaults) if "choices" in kw else None,
            "default": _literal(kw["default"], defaults) if "default" in kw else None,
        }
        flags.append(flag)
    return flags


def _unwrap(node):
    """(inner type node, optional?) of Optional[X], Union[X, None] and X | None."""
    if isinstance(node, ast.Subscript) and getattr(node.value, "id", "") == "Optional":
        return node.slice, True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        for side in (node.left, node.right):
            if not (isinstance(side, ast.Constant) and side.value is None):
                return side, True
    if isinstance(node, ast.Subscript) and getattr(node.value, "id", "") == "Union":
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        rest = [e for e in elts if not (isinstance(e, ast.Constant) and e.value is None)]
        if rest:
            return rest[0], True
    return node, False


def _annotated_fields(tree):
    """Every ``name: A[...]`` / ``name: Annotated[...]`` field of a class: (node, parts)."""
    for cls in ast.walk(tree):
        if not isinstance(cls, ast.ClassDef):
            continue
        for node in cls.body:
            if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
                continue
            ann = node.annotation
            if not isinstance(ann, ast.Subscript):
                continue
            if getattr(ann.value, "id", "") not in ("A", "Annotated"):
                continue
            parts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
            yield node, parts


def _is_help(node):
    """A help text: a string, an f-string or strings joined with +."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    return isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and _is_help(node.left)


def _cli_meta(parts):
    """The keywords of a field's CLI metadata, {} for a bare help text, None without either.

    As arg_utils' _unwrap_annotated: the first ``Arg(...)`` or string after the type, so
    markers beside it (``NS("group")``, before or after) do not hide the field.
    """
    for meta in parts[1:]:
        if _is_help(meta):
            return {}
        if isinstance(meta, ast.Call) and getattr(meta.func, "id", "") == "Arg":
            return {k.arg: k.value for k in meta.keywords if k.arg}
    return None


def declarations(source):
    """How many flags a file declares, counted apart from how they are read.

    Every ``add_argument("-...", ...)`` call and every annotated class field, less the
    fields upstream never puts on the command line: ``Arg(no_cli=True)``, or nothing after
    the type but markers (NON_CLI). A field with metadata of another kind is counted, so a
    layout this file does not read shows as flags missing.
    """
    tree = ast.parse(source)
    count = 0
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_argument"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and str(node.args[0].value).startswith("-")
        ):
            count += 1
    for _node, parts in _annotated_fields(tree):
        kw = _cli_meta(parts) or {}
        if "no_cli" in kw and _literal(kw["no_cli"], {}):
            continue
        if all(
            isinstance(meta, ast.Call) and getattr(meta.func, "id", "") in NON_CLI
            for meta in parts[1:]
        ):
            continue
        count += 1
    return count


def field_flags(source):
    """Flags of every ``A[type, "help" | Arg(...)]`` field (arg_utils' own derivation rules)."""
    flags = []
    for node, parts in _annotated_fields(ast.parse(source)):
        kw = _cli_meta(parts)
        if kw is None:
            continue
        if _literal(kw["no_cli"], {}) if "no_cli" in kw else False:
            continue
        name = node.target.id
        cli = _literal(kw["cli_name"], {}) if "cli_name" in kw else None
        names = [cli or "--" + name.replace("_", "-")]
        names += _literal(kw["aliases"], {}) or [] if "aliases" in kw else []
        inner, _optional = _unwrap(parts[0])
        flag = {
            "names": names,
            "dest": name,
            "action": "store",
            "type": "str",
            "nargs": _literal(kw["nargs"], {}) if "nargs" in kw else None,
            "choices": _literal(kw["choices"], {}) if "choices" in kw else None,
            "default": _literal(node.value, {}) if node.value is not None else None,
        }
        kind = getattr(inner, "id", None) or getattr(getattr(inner, "value", None), "id", None)
        if "action" in kw:
            action = _literal(kw["action"], {})
            flag["action"] = action if action in ("store_true", "store_false") else "store"
            if flag["action"] == "store" and not isinstance(kw["action"], ast.Constant):
                flag["nargs"] = flag["nargs"] or "?"
        elif kind == "Literal":
            values = _literal(inner.slice, {})
            values = values if isinstance(values, list) else [values]
            flag["choices"] = flag["choices"] or values
            if values and isinstance(values[0], (int, float)) and not isinstance(values[0], bool):
                flag["type"] = type(values[0]).__name__
        elif kind in ("list", "List"):
            flag["nargs"] = flag["nargs"] or "+"
        elif kind == "bool":
            flag["action"] = "store_true"
        elif kind in ("int", "float"):
            flag["type"] = kind
        flags.append(flag)
    return flags


def release_flags(sources):
    """(flags, declarations counted) of a release: {member: source} of server_args.py and
    the files under arg_groups/. A flag is kept once, its first declaration winning."""
    flags, declared, seen = [], 0, set()
    for member in sorted(sources, key=lambda m: (m != SERVER_ARGS, m)):
        source = sources[member]
        declared += declarations(source)
        found = server_flags(source) if member == SERVER_ARGS else []
        for flag in found + field_flags(source):
            if not seen.intersection(flag["names"]):
                flags.append(flag)
                seen.update(flag["names"])
    return flags, declared


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheel", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    with zipfile.ZipFile(args.wheel) as wheel:
        names = set(wheel.namelist())
        for name, required in FILES.items():
            if name not in names:
                if required:
                    sys.exit(f"extract: {name} is not in {args.wheel}")
                print(f"extract: {name} is not part of this release (skipped)")
                continue
            info = wheel.getinfo(name)
            target = os.path.join(args.out, name)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with wheel.open(info) as src, open(target, "wb") as dst:
                dst.write(src.read())
            stamp = time.mktime((*info.date_time, 0, 0, -1))
            os.utime(target, (stamp, stamp))
        sources = {
            member: wheel.read(member).decode()
            for member in sorted(names)
            if member == SERVER_ARGS or (member.startswith(ARG_FIELDS) and member.endswith(".py"))
        }
    flags, declared = release_flags(sources)
    if len(flags) < MIN_READ * declared:
        sys.exit(
            f"extract: read {len(flags)} flags of the {declared} that server_args.py and "
            f"arg_groups/ of {os.path.basename(args.wheel)} declare: a field layout "
            "extract.py does not read; teach it the layout (twin/engine/README.md)"
        )
    target = os.path.join(args.out, "sglang", "flags.json")
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target, "w", encoding="utf-8") as handle:
        json.dump(flags, handle, indent=1, sort_keys=True)
        handle.write("\n")
    print(f"extract: {len(flags)} server flags ({declared} declared)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
