# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Named HARDEN patches for SGLang source files.

Private to sparkfleet.serving: the logic behind the ``sglang_patch`` module.
Standard library only, Python 3.8 syntax (it runs on the node).

Every anchor is found by structure: ``ast`` locates the class, the method and
the statement by its shape, then text is spliced in at those line numbers so
that the rest of the file stays byte-identical. A patch's code carries a
comment with ``HARDEN-PATCH <name>``; a source that already carries that
marker does not get the patch twice. All patches are computed in memory and the
result must compile, so a caller writes either the whole result or nothing.
"""

from __future__ import annotations

import ast
import collections
import hashlib
import io
import re
import tokenize

MARKER = "HARDEN-PATCH"
MAX_TOKENS_CLAMP = "max_tokens_clamp"
WATCHDOG_STACK_DUMP = "watchdog_stack_dump"
SM12X_GATE = "sm12x_gate"
PATCH_NAMES = (MAX_TOKENS_CLAMP, WATCHDOG_STACK_DUMP, SM12X_GATE)
DEFAULT_MIN_NEW_TOKENS = 16

# Prefix of the rids SGLang gives its own /health_generate probes.
HEALTH_CHECK_RID_PREFIX = "HEALTH_CHECK"
# Compute capability GB10 (DGX Spark) reports; RTX Blackwell reports (12, 0).
SM12X_MAJOR = 12

_MARKER_RE = re.compile(re.escape(MARKER) + r"\s+([A-Za-z0-9_]+)")
_LINE_RE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")

PatchResult = collections.namedtuple("PatchResult", ["text", "applied", "already_present"])
PatchResult.__doc__ = """Outcome of apply_patches.

text: the patched source; applied: the requested patches the text carries, in
the order requested; already_present: those of them the source already carried.
"""


class PatchError(Exception):
    """A patch cannot be applied; the message names the patch, the file and the anchor."""

    def __init__(self, patch, path, message):
        self.patch = patch
        self.path = path
        super().__init__(f"{patch}: {message}" if patch else message)


def marker(name):
    """The text that marks code inserted by patch ``name`` (grep for it in the container)."""
    return f"{MARKER} {name}"


def sha256_hex(data):
    """SHA-256 hex digest of ``data`` (bytes, or str encoded as UTF-8)."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def markers_in(text):
    """Names of the patches whose marker appears in a comment of ``text`` (a set)."""
    found = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                found.update(_MARKER_RE.findall(tok.string))
    except (tokenize.TokenError, SyntaxError):
        for line in text.splitlines():
            if "#" in line:
                found.update(_MARKER_RE.findall(line[line.index("#") :]))
    return found & set(PATCH_NAMES)


def normalize_names(names):
    """Validate patch names and drop duplicates, keeping the order given."""
    out = []
    for name in names:
        if name not in PATCH_NAMES:
            raise ValueError(f"unknown patch {name!r}; known patches: {', '.join(PATCH_NAMES)}")
        if name not in out:
            out.append(name)
    if not out:
        raise ValueError("no patch requested")
    return out


def apply_patches(text, names, path="<src>", min_new_tokens=DEFAULT_MIN_NEW_TOKENS):
    """Apply the named patches to source ``text`` in memory; return a PatchResult.

    ``path`` is only used in messages. Raises PatchError when the source does not
    parse, an anchor is missing or the result does not compile; ValueError for an
    unknown patch name or a min_new_tokens below 1.
    """
    names = normalize_names(names)
    if isinstance(min_new_tokens, bool) or not isinstance(min_new_tokens, int):
        raise ValueError(f"min_new_tokens must be an integer, got {min_new_tokens!r}")
    if min_new_tokens < 1:
        raise ValueError(f"min_new_tokens must be at least 1, got {min_new_tokens}")
    _parse(text, path, None)
    present = markers_in(text)
    out = text
    for name in names:
        if name in present:
            continue
        if name == MAX_TOKENS_CLAMP:
            out = patch_max_tokens_clamp(out, path, min_new_tokens)
        elif name == WATCHDOG_STACK_DUMP:
            out = patch_watchdog_stack_dump(out, path)
        else:
            out = patch_sm12x_gate(out, path)
    check_compiles(out, path)
    return PatchResult(out, names, [n for n in names if n in present])


def check_compiles(text, path="<src>"):
    """Compile ``text`` to bytecode; PatchError naming the line if it does not."""
    try:
        compile(text, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None)
        where = "" if line is None else f" (line {line})"
        raise PatchError(None, path, f"patched {path} does not compile{where}: {exc}") from exc


# --- max_tokens_clamp ---------------------------------------------------------


def patch_max_tokens_clamp(text, path="<src>", min_new_tokens=DEFAULT_MIN_NEW_TOKENS):
    """Clamp 0 < max_new_tokens < min_new_tokens up to min_new_tokens.

    Inserted in TokenizerManager._validate_one_request right after the statement
    ``max_new_tokens = <obj>.sampling_params.get("max_new_tokens")``, before the
    context-length check, so truncation still applies to the clamped value.
    Requests with 0 or None and rids starting with HEALTH_CHECK are left alone.
    """
    name = MAX_TOKENS_CLAMP
    tree = _parse(text, path, name)
    func = _find_method(tree, "TokenizerManager", "_validate_one_request", name, path)
    anchors = [node for node in _walk_body(func.body) if _reads_max_new_tokens(node)]
    if not anchors:
        raise PatchError(
            name,
            path,
            "cannot find 'max_new_tokens = obj.sampling_params.get(\"max_new_tokens\")' "
            f"in TokenizerManager._validate_one_request of {path}",
        )
    doc = _Doc(text)
    inserts = []
    for stmt in anchors:
        indent = doc.own_line_indent(stmt, name, path)
        params = _segment(text, stmt.value.func.value)
        req = _segment(text, stmt.value.func.value.value)
        if "\n" in params or "\r" in params:
            params, req = f"({params})", f"({req})"
        var = _target(stmt).id
        unit = "\t" if "\t" in indent else "    "
        n = min_new_tokens
        lines = [
            f"# {marker(name)}: a request for 0 < max_new_tokens < {n} gets {n}",
            "# (speculative decoding wedges the scheduler when max_new_tokens <= the number",
            "# of draft tokens). Before the context check, so truncation still applies;",
            "# prefill-only copies (0) and the server's health probes are left alone.",
            "if (",
            f"{unit}isinstance({var}, int)",
            f"{unit}and 0 < {var} < {n}",
            f"{unit}and not (",
            f'{unit}{unit}isinstance(getattr({req}, "rid", None), str)',
            f'{unit}{unit}and {req}.rid.startswith("{HEALTH_CHECK_RID_PREFIX}")',
            f"{unit})",
            "):",
            f'{unit}{params}["max_new_tokens"] = {var} = {n}',
        ]
        inserts.append((stmt.end_lineno, [indent + line for line in lines]))
    return doc.insert_after(inserts)


def _reads_max_new_tokens(node):
    """``max_new_tokens = <expr>.sampling_params.get("max_new_tokens"[, ...])``."""
    target = _target(node)
    if target is None or not isinstance(target, ast.Name) or target.id != "max_new_tokens":
        return False
    call = node.value
    return (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == "get"
        and isinstance(call.func.value, ast.Attribute)
        and call.func.value.attr == "sampling_params"
        and len(call.args) >= 1
        and _const(call.args[0]) == "max_new_tokens"
    )


def _target(node):
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        return node.targets[0]
    if isinstance(node, ast.AnnAssign) and node.value is not None:
        return node.target
    return None


# --- watchdog_stack_dump ------------------------------------------------------


def patch_watchdog_stack_dump(text, path="<src>"):
    """Log every thread's Python stack when the watchdog times out.

    Inserted in WatchdogRaw._watchdog_once after the wait loop (a ``while`` that
    breaks on timeout) and right before the existing ``pyspy_dump_schedulers()``
    call, whose py-spy cannot dump in some images.
    """
    name = WATCHDOG_STACK_DUMP
    tree = _parse(text, path, name)
    if not any(_assigns_name(stmt, "logger") for stmt in tree.body):
        raise PatchError(name, path, f"cannot find a module-level 'logger = ...' in {path}")
    func = _find_method(tree, "WatchdogRaw", "_watchdog_once", name, path)
    where = f"WatchdogRaw._watchdog_once of {path}"
    loops = [
        i
        for i, stmt in enumerate(func.body)
        if isinstance(stmt, ast.While) and any(_loop_breaks(stmt.body))
    ]
    if not loops:
        raise PatchError(
            name, path, f"cannot find the wait loop ('while ...: ... break') in {where}"
        )
    after = func.body[loops[0] + 1 :]
    dumps = [node for node in _walk_body(after) if _calls_pyspy(node)]
    if not dumps:
        raise PatchError(
            name,
            path,
            f"cannot find the py-spy dump call 'pyspy_dump_schedulers()' after the wait loop "
            f"in {where}",
        )
    if not func.args.args:
        raise PatchError(name, path, f"cannot find the 'self' argument of {where}")
    this = func.args.args[0].arg
    doc = _Doc(text)
    stmt = dumps[0]
    indent = doc.own_line_indent(stmt, name, path)
    unit = "\t" if "\t" in indent else "    "
    body = [
        f"# {marker(name)}: py-spy cannot dump in some images, so log",
        "# every thread's Python stack (name and ident) before trying it: a hang",
        "# then always leaves a stack in the log.",
        "try:",
        f"{unit}import sys as _harden_sys",
        f"{unit}import threading as _harden_threading",
        f"{unit}import traceback as _harden_traceback",
        "",
        f"{unit}_harden_names = {{t.ident: t.name for t in _harden_threading.enumerate()}}",
        f"{unit}_harden_stacks = []",
        f"{unit}for _harden_ident, _harden_frame in _harden_sys._current_frames().items():",
        f"{unit}{unit}_harden_stacks.append(",
        f'{unit}{unit}{unit}"--- thread %r (ident %d) ---\\n%s"',
        f"{unit}{unit}{unit}% (",
        f'{unit}{unit}{unit}{unit}_harden_names.get(_harden_ident, "<unknown>"),',
        f"{unit}{unit}{unit}{unit}_harden_ident,",
        f'{unit}{unit}{unit}{unit}"".join(_harden_traceback.format_stack(_harden_frame)),',
        f"{unit}{unit}{unit})",
        f"{unit}{unit})",
        f"{unit}logger.error(",
        f'{unit}{unit}"%s watchdog timeout: Python stacks of all %d threads:\\n%s",',
        f'{unit}{unit}getattr({this}, "debug_name", "watchdog"),',
        f"{unit}{unit}len(_harden_stacks),",
        f'{unit}{unit}"\\n".join(_harden_stacks),',
        f"{unit})",
        "except Exception as _harden_exc:",
        f'{unit}logger.error("watchdog timeout: all-thread stack dump failed: %r", _harden_exc)',
        "",
    ]
    lines = [indent + line if line else "" for line in body]
    return doc.insert_before([(stmt.lineno, lines)])


def _assigns_name(stmt, name):
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [getattr(stmt, "target", None)]
    return any(isinstance(t, ast.Name) and t.id == name for t in targets)


def _loop_breaks(body):
    """Yield the ``break`` statements that leave this loop (not an inner one)."""
    for stmt in body:
        if isinstance(stmt, ast.Break):
            yield stmt
        elif isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
            yield from _loop_breaks(stmt.orelse)
        elif not isinstance(stmt, _SCOPES):
            for field in ("body", "orelse", "finalbody"):
                yield from _loop_breaks(getattr(stmt, field, []))
            for handler in getattr(stmt, "handlers", []):
                yield from _loop_breaks(handler.body)


def _calls_pyspy(node):
    if not isinstance(node, ast.Expr) or not isinstance(node.value, ast.Call):
        return False
    func = node.value.func
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
    return name == "pyspy_dump_schedulers"


# --- sm12x_gate ---------------------------------------------------------------


def find_sm12x_gates(text, path="<src>"):
    """Exact SM120 gates in ``text``: a list of (lineno, original source, rewritten source).

    Recognised: ``<expr> == (12, 0)``, ``(12, 0) == <expr>`` and the ``!=`` forms,
    and ``major == 12 and minor == 0`` (names/attributes ending in major/minor, or
    ``<x>[0] == 12 and <x>[1] == 0``). Each is rewritten to compare the major only.
    """
    tree = _parse(text, path, SM12X_GATE)
    return [(gate[0].lineno, _segment(text, gate[0]), gate[1]) for gate in _gates(tree, text)]


def patch_sm12x_gate(text, path="<src>"):
    """Widen every exact (12, 0) compute-capability gate to the SM12x family.

    GB10 (DGX Spark) reports (12, 1); a gate written for RTX Blackwell (12, 0)
    turns it away. Each gate is rewritten to compare the major version only, and
    the statement holding it is preceded by a marker comment.
    """
    name = SM12X_GATE
    tree = _parse(text, path, name)
    gates = _gates(tree, text)
    if not gates:
        raise PatchError(
            name,
            path,
            "cannot find an exact (12, 0) compute-capability gate "
            "(e.g. 'torch.cuda.get_device_capability() == (12, 0)' or "
            f"'major == 12 and minor == 0') in {path}",
        )
    doc = _Doc(text)
    spans = sorted((_span(doc, gate[0]), gate[1]) for gate in gates)
    for prev, cur in zip(spans, spans[1:]):
        if cur[0][0] < prev[0][1]:
            raise PatchError(name, path, f"overlapping (12, 0) gates in {path}")
    comment = f"# {marker(name)}: exact (12, 0) gate widened to SM12x (GB10 reports (12, 1))"
    for lineno in sorted({gate[2].lineno for gate in gates}):
        start = doc.offset(lineno, 0)
        spans.append(((start, start), doc.indent_of(lineno) + comment + doc.newline))
    return doc.replace(spans)


def _gates(tree, text):
    """(node, replacement, enclosing statement) for every exact SM120 gate."""
    found = []
    for node, stmt in _walk_with_stmt(tree):
        new = None
        if isinstance(node, ast.Compare):
            new = _rewrite_tuple_gate(node, text)
        elif isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
            new = _rewrite_major_minor_gate(node, text)
        if new is not None:
            found.append((node, new, stmt))
    return found


def _rewrite_tuple_gate(node, text):
    if len(node.ops) != 1 or not isinstance(node.ops[0], (ast.Eq, ast.NotEq)):
        return None
    left, right = node.left, node.comparators[0]
    if _is_sm120_tuple(right):
        expr = left
    elif _is_sm120_tuple(left):
        expr = right
    else:
        return None
    op = "==" if isinstance(node.ops[0], ast.Eq) else "!="
    return f"{_atom(text, expr)}[0] {op} {SM12X_MAJOR}"


def _rewrite_major_minor_gate(node, text):
    values = node.values
    for i, major in enumerate(values):
        major_expr = _compared_to(major, SM12X_MAJOR)
        if major_expr is None or not _names_part(major_expr, "major", 0):
            continue
        for j, minor in enumerate(values):
            minor_expr = _compared_to(minor, 0)
            if j == i or minor_expr is None or not _names_part(minor_expr, "minor", 1):
                continue
            if _subscript_base(major_expr) != _subscript_base(minor_expr):
                continue
            kept = [_operand(text, v) for k, v in enumerate(values) if k != j]
            joined = " and ".join(kept)
            return f"({joined})" if "\n" in joined or "\r" in joined else joined
    return None


def _is_sm120_tuple(node):
    return (
        isinstance(node, ast.Tuple)
        and len(node.elts) == 2
        and [_const(e) for e in node.elts] == [SM12X_MAJOR, 0]
        and not any(isinstance(_const(e), bool) for e in node.elts)
    )


def _compared_to(node, value):
    """``<x> == value`` or ``value == <x>`` (ints, not bools) -> <x>, else None."""
    if not isinstance(node, ast.Compare) or len(node.ops) != 1:
        return None
    if not isinstance(node.ops[0], ast.Eq):
        return None
    left, right = node.left, node.comparators[0]
    for const, other in ((right, left), (left, right)):
        number = _const(const)
        if isinstance(number, int) and not isinstance(number, bool) and number == value:
            return other
    return None


def _names_part(expr, word, index):
    """``major``/``cap.major``/``cc_major``, or ``<x>[0]`` for the major (``[1]`` minor)."""
    if isinstance(expr, ast.Name):
        return expr.id.lower().endswith(word)
    if isinstance(expr, ast.Attribute):
        return expr.attr.lower().endswith(word)
    if isinstance(expr, ast.Subscript):
        return _const(_slice(expr)) == index
    return False


def _subscript_base(expr):
    """For ``x[0]``/``x[1]`` the dump of ``x`` (both halves must index one tuple)."""
    if isinstance(expr, ast.Subscript):
        return ast.dump(expr.value)
    return None


def _slice(node):
    sl = node.slice
    return getattr(sl, "value", sl) if type(sl).__name__ == "Index" else sl


def _atom(text, node):
    """Source of ``node``, parenthesised unless it already binds tighter than ``[]``."""
    seg = _segment(text, node)
    if isinstance(node, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)):
        return seg
    return f"({seg})"


def _operand(text, node):
    """Source of an ``and`` operand, parenthesised where precedence needs it."""
    seg = _segment(text, node)
    safe = (ast.Compare, ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Constant)
    return seg if isinstance(node, safe) else f"({seg})"


def _walk_with_stmt(tree):
    """Yield (node, innermost enclosing statement) for every expression node.

    Skips f-string internals (their positions are unreliable before Python 3.12).
    """
    stack = [(child, None) for child in reversed(tree.body)]
    while stack:
        node, stmt = stack.pop()
        if isinstance(node, ast.stmt):
            stmt = node
        elif isinstance(node, ast.JoinedStr):
            continue
        else:
            yield node, stmt
        children = list(ast.iter_child_nodes(node))
        stack.extend((child, stmt) for child in reversed(children))


# --- shared helpers -----------------------------------------------------------

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _parse(text, path, patch):
    try:
        return ast.parse(text, filename=path)
    except (SyntaxError, ValueError) as exc:
        raise PatchError(
            patch, path, f"cannot parse {path} as Python on this interpreter: {exc}"
        ) from exc


def _find_method(tree, class_name, method_name, patch, path):
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name]
    if not classes:
        raise PatchError(patch, path, f"cannot find class {class_name} in {path}")
    for node in classes[0].body:
        is_func = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        if is_func and node.name == method_name:
            return node
    raise PatchError(patch, path, f"cannot find method {class_name}.{method_name} in {path}")


def _walk_body(body):
    """Statements of a block and its nested blocks, in order, not entering new scopes."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, _SCOPES):
            continue
        for field in ("body", "orelse", "finalbody"):
            yield from _walk_body(getattr(stmt, field, []))
        for handler in getattr(stmt, "handlers", []):
            yield from _walk_body(handler.body)
        for case in getattr(stmt, "cases", []):
            yield from _walk_body(case.body)


def _const(node):
    if isinstance(node, ast.Constant):
        return node.value
    return None


def _segment(text, node):
    seg = ast.get_source_segment(text, node)
    if seg is None:
        raise ValueError(f"no source position for {ast.dump(node)}")
    return seg


def _span(doc, node):
    return (
        doc.offset(node.lineno, node.col_offset),
        doc.offset(node.end_lineno, node.end_col_offset),
    )


class _Doc:
    """Source split into physical lines (ends kept) with ast-position arithmetic."""

    def __init__(self, text):
        self.text = text
        self.lines = _LINE_RE.findall(text)
        self.starts = []
        pos = 0
        for line in self.lines:
            self.starts.append(pos)
            pos += len(line)
        first = self.lines[0] if self.lines else "\n"
        self.newline = "\r\n" if first.endswith("\r\n") else "\n"

    def offset(self, lineno, col):
        """Character offset of ast (lineno, UTF-8 byte col)."""
        line = self.lines[lineno - 1]
        return self.starts[lineno - 1] + len(line.encode("utf-8")[:col].decode("utf-8"))

    def indent_of(self, lineno):
        line = self.lines[lineno - 1]
        return line[: len(line) - len(line.lstrip(" \t"))]

    def own_line_indent(self, stmt, patch, path):
        """Indentation of ``stmt``; PatchError unless it is alone on its lines."""
        start = self.lines[stmt.lineno - 1]
        head = start.encode("utf-8")[: stmt.col_offset].decode("utf-8")
        end = self.lines[stmt.end_lineno - 1]
        tail = end.encode("utf-8")[stmt.end_col_offset :].decode("utf-8").strip()
        if head.strip() or (tail and not tail.startswith("#")):
            raise PatchError(
                patch,
                path,
                f"the anchor statement on line {stmt.lineno} of {path} shares its line "
                "with other code; expected it on lines of its own",
            )
        return head

    def insert_after(self, inserts):
        """Insert lists of lines after the given 1-based line numbers."""
        return self._insert(list(inserts))

    def insert_before(self, inserts):
        """Insert lists of lines before the given 1-based line numbers."""
        return self._insert([(lineno - 1, lines) for lineno, lines in inserts])

    def _insert(self, inserts):
        out = list(self.lines)
        for after, lines in sorted(inserts, key=lambda item: item[0], reverse=True):
            if after == len(out) and out and not out[-1].endswith(("\n", "\r")):
                out[-1] += self.newline
            out[after:after] = [line + self.newline for line in lines]
        return "".join(out)

    def replace(self, spans):
        """Replace non-overlapping ((start, end), new text) character spans."""
        out = self.text
        for (start, end), new in sorted(spans, reverse=True):
            out = out[:start] + new + out[end:]
        return out
