"""Unit tests for plugins/module_utils/_patch.py against real SGLang releases."""

from __future__ import annotations

import ast
import difflib
import functools
import logging
import os
import sys
import threading
import time
import types

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
_UNIT = os.path.dirname(os.path.dirname(_HERE))
_REPO = os.path.dirname(os.path.dirname(_UNIT))
for _path in (_UNIT, os.path.join(_REPO, "twin", "engine")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

import sglang_releases as releases  # noqa: E402

from ansible_collections.sparkfleet.serving.plugins.module_utils import _patch  # noqa: E402
from sparksim import upstream  # noqa: E402

WATCHDOG_RELEASES = [v for v in releases.RELEASES if releases.has_watchdog(v)]
PRE_WATCHDOG_RELEASES = [v for v in releases.RELEASES if not releases.has_watchdog(v)]
# 0.5.23 files that carry an exact (12, 0) gate (see find_sm12x_gates).
GATE_RELEASE = "0.5.23"
COMMON = "sglang/srt/utils/common.py"
SKINNY_GEMM = "sglang/kernels/kda_kernels/sm120_fp8_skinny_gemm_sm120.py"
NVFP4_GEMM = "sglang/kernels/kda_kernels/qwen3x_nvfp4_gemm.py"
SANA = "sglang/kernels/ops/diffusion/attention/sana_wm_gdn_chunkwise_triton.py"

CLAMP = _patch.MAX_TOKENS_CLAMP
STACK_DUMP = _patch.WATCHDOG_STACK_DUMP
GATE = _patch.SM12X_GATE
WATCHDOG_LOGGER = "sglang.srt.utils.watchdog"
# How the original _watchdog_once's timeout message for the test watchdog starts.
TIMEOUT_MESSAGE = "sparkfleet-test watchdog timeout ("


@functools.lru_cache(maxsize=None)
def original(version, member):
    text = releases.read_text(version, member)
    assert text is not None, f"{member} missing from sglang {version}"
    return text


def tokenizer_manager(version):
    return original(version, releases.TOKENIZER_MANAGER)


def watchdog(version):
    return original(version, releases.WATCHDOG)


def only_insertions(before, after):
    """True when ``after`` is ``before`` with whole lines added and nothing else."""
    matcher = difflib.SequenceMatcher(
        None, before.splitlines(True), after.splitlines(True), autojunk=False
    )
    return {opcode[0] for opcode in matcher.get_opcodes()} <= {"equal", "insert"}


def write_tree(root, files):
    """Write {member: text} under root (a fake <root>/sglang/srt/... tree)."""
    for member, text in files.items():
        path = os.path.join(str(root), *member.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
    return str(root)


@pytest.fixture
def clean_import():
    upstream.uninstall()
    yield
    upstream.uninstall()


def drop_anchor(text):
    """Remove the ``max_new_tokens = ....get("max_new_tokens")`` statement's lines."""
    lines = text.splitlines(True)
    for node in ast.walk(ast.parse(text)):
        if _patch._reads_max_new_tokens(node):
            del lines[node.lineno - 1 : node.end_lineno]
            return "".join(lines)
    raise AssertionError("anchor not found in the original")


# --- max_tokens_clamp ---------------------------------------------------------


@pytest.mark.parametrize("version", releases.RELEASES)
def test_clamp_applies_compiles_and_is_idempotent(version):
    src = tokenizer_manager(version)
    result = _patch.apply_patches(src, [CLAMP], path="tokenizer_manager.py")

    assert result.applied == [CLAMP]
    assert result.already_present == []
    assert result.text.count(f"# HARDEN-PATCH {CLAMP}:") == 1
    assert only_insertions(src, result.text)
    compile(result.text, "tokenizer_manager.py", "exec")
    # Inserted right after the anchor statement, before the total-token check.
    lines = result.text.splitlines()
    at = next(i for i, line in enumerate(lines) if "HARDEN-PATCH" in line)
    assert lines[at - 1].strip() == 'max_new_tokens = obj.sampling_params.get("max_new_tokens")'

    again = _patch.apply_patches(result.text, [CLAMP], path="tokenizer_manager.py")
    assert again.text == result.text
    assert again.applied == [CLAMP]
    assert again.already_present == [CLAMP]


CLAMP_CASES = [
    # (max_new_tokens or "absent", rid, expected after validation)
    pytest.param(8, "req-0", 16, id="8-clamped"),
    pytest.param(1, "req-0", 16, id="1-clamped"),
    pytest.param(15, "req-0", 16, id="15-clamped"),
    pytest.param(16, "req-0", 16, id="16-kept"),
    pytest.param(0, "req-0", 0, id="0-prefill-only"),
    pytest.param(None, "req-0", None, id="none"),
    pytest.param("absent", "req-0", "absent", id="absent"),
    pytest.param(200, "req-0", 200, id="200-kept"),
    pytest.param(1, "HEALTH_CHECK_1754000000.0", 1, id="health-probe"),
    pytest.param(1, "HEALTH_CHECK", 1, id="health-probe-bare"),
    pytest.param(8, ["HEALTH_CHECK_x"], 16, id="non-str-rid"),
    pytest.param(8, "req-HEALTH_CHECK", 16, id="health-not-prefix"),
]


def validate(module, max_new_tokens, rid="req-0", context_len=4096, truncate=False, n_input=10):
    params = {} if max_new_tokens == "absent" else {"max_new_tokens": max_new_tokens}
    req = upstream.make_request(module, params, rid=rid)
    tm = upstream.make_validator(module, context_len, allow_auto_truncate=truncate)
    tm._validate_one_request(req, list(range(n_input)))
    return req.sampling_params.get("max_new_tokens", "absent")


@pytest.fixture(scope="module")
def patched_trees(tmp_path_factory):
    """{version: root} with the patched tokenizer_manager.py (and watchdog.py)."""
    trees = {}
    for version in releases.RELEASES:
        files = {
            releases.TOKENIZER_MANAGER: _patch.apply_patches(
                tokenizer_manager(version), [CLAMP]
            ).text
        }
        if releases.has_watchdog(version):
            files[releases.WATCHDOG] = _patch.apply_patches(watchdog(version), [STACK_DUMP]).text
        trees[version] = write_tree(tmp_path_factory.mktemp(f"patched-{version}"), files)
    return trees


@pytest.mark.parametrize("version", releases.RELEASES)
def test_clamp_behaviour_in_real_validate_one_request(version, patched_trees, clean_import):
    module = upstream.load_tokenizer_manager(patched_trees[version])
    # The code that runs is the patched file, not a cached original.
    with open(module.__file__, encoding="utf-8") as handle:
        assert "HARDEN-PATCH max_tokens_clamp" in handle.read()
    for case in CLAMP_CASES:
        max_new_tokens, rid, expected = case.values
        got = validate(module, max_new_tokens, rid=rid)
        assert got == expected, f"{case.id}: {max_new_tokens!r} -> {got!r}"


@pytest.mark.parametrize("version", releases.RELEASES)
def test_clamp_truncation_still_applies_to_clamped_value(version, patched_trees, clean_import):
    module = upstream.load_tokenizer_manager(patched_trees[version])
    # 10 input tokens + 16 (clamped from 8) exceed a context of 20: truncated to 10.
    assert validate(module, 8, context_len=20, truncate=True) == 10
    with pytest.raises(ValueError, match="maximum context length"):
        validate(module, 8, context_len=20, truncate=False)
    # Unclamped requests keep the original behaviour.
    assert validate(module, 5000, context_len=20, truncate=True) == 10


@pytest.mark.parametrize("version", releases.RELEASES)
def test_unpatched_file_leaves_small_max_new_tokens_alone(version, tmp_path, clean_import):
    root = write_tree(tmp_path, {releases.TOKENIZER_MANAGER: tokenizer_manager(version)})
    module = upstream.load_tokenizer_manager(root)
    assert validate(module, 8) == 8
    # 10 + 8 fits a context of 20: no truncation and no error without the clamp.
    assert validate(module, 8, context_len=20, truncate=False) == 8


def test_clamp_honours_min_new_tokens(tmp_path, clean_import):
    text = _patch.apply_patches(tokenizer_manager("0.5.23"), [CLAMP], min_new_tokens=32).text
    assert "0 < max_new_tokens < 32" in text
    module = upstream.load_tokenizer_manager(
        write_tree(tmp_path, {releases.TOKENIZER_MANAGER: text})
    )
    assert [validate(module, n) for n in (8, 16, 31, 32, 0)] == [32, 32, 32, 32, 0]


@pytest.mark.parametrize("version", releases.RELEASES)
def test_clamp_fails_on_drifted_file(version):
    drifted = drop_anchor(tokenizer_manager(version))
    with pytest.raises(_patch.PatchError) as err:
        _patch.apply_patches(drifted, [CLAMP], path="/x/tokenizer_manager.py")
    assert str(err.value) == (
        "max_tokens_clamp: cannot find "
        "'max_new_tokens = obj.sampling_params.get(\"max_new_tokens\")' "
        "in TokenizerManager._validate_one_request of /x/tokenizer_manager.py"
    )
    assert err.value.patch == CLAMP


@pytest.mark.parametrize(
    "old, new, expected",
    [
        ("def _validate_one_request(", "def _validate_request(", "method TokenizerManager."),
        ("class TokenizerManager", "class TokenizerManagerV2", "class TokenizerManager in"),
    ],
)
def test_clamp_names_missing_class_or_method(old, new, expected):
    drifted = tokenizer_manager("0.5.12").replace(old, new)
    with pytest.raises(_patch.PatchError, match=f"^max_tokens_clamp: cannot find {expected}"):
        _patch.apply_patches(drifted, [CLAMP], path="tm.py")


# --- watchdog_stack_dump ------------------------------------------------------


@pytest.mark.parametrize("version", WATCHDOG_RELEASES)
def test_stack_dump_applies_compiles_and_is_idempotent(version):
    src = watchdog(version)
    result = _patch.apply_patches(src, [STACK_DUMP], path="watchdog.py")
    assert result.applied == [STACK_DUMP]
    assert result.text.count(f"# HARDEN-PATCH {STACK_DUMP}:") == 1
    assert only_insertions(src, result.text)
    compile(result.text, "watchdog.py", "exec")
    # After the wait loop, right before the py-spy dump.
    body = result.text[result.text.index("def _watchdog_once") :]
    assert body.index("break") < body.index("HARDEN-PATCH") < body.index("pyspy_dump_schedulers()")
    again = _patch.apply_patches(result.text, [STACK_DUMP], path="watchdog.py")
    assert again.text == result.text
    assert again.already_present == [STACK_DUMP]


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())

    def wait_for(self, prefix, timeout=10.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(message.startswith(prefix) for message in list(self.messages)):
                return
            time.sleep(0.02)
        raise AssertionError(f"no log record starting with {prefix!r}: {self.messages!r}")


def run_watchdog_until_timeout(module):
    """Start two named threads and a soft WatchdogRaw that times out; return the log."""
    records = _Records()
    logger = logging.getLogger(WATCHDOG_LOGGER)
    logger.addHandler(records)
    stop = threading.Event()
    active = [True]

    def parked_in_a_test_thread():
        stop.wait()

    threads = [
        threading.Thread(target=parked_in_a_test_thread, name=name, daemon=True)
        for name in ("sparkfleet-extra-alpha", "sparkfleet-extra-beta")
    ]
    for thread in threads:
        thread.start()
    try:
        module.WatchdogRaw(
            debug_name="sparkfleet-test",
            get_counter=lambda: 0,
            is_active=lambda: active[0],
            watchdog_timeout=0.2,
            soft=True,
        )
        # The original timeout message comes last in _watchdog_once.
        records.wait_for(TIMEOUT_MESSAGE)
    finally:
        active[0] = False  # the watchdog thread idles from now on
        stop.set()
        for thread in threads:
            thread.join(5)
        logger.removeHandler(records)
    return threads, records.messages


@pytest.mark.parametrize("version", WATCHDOG_RELEASES)
def test_stack_dump_logs_every_thread_on_timeout(version, patched_trees, clean_import):
    module = upstream.load_watchdog(patched_trees[version])
    threads, messages = run_watchdog_until_timeout(module)

    dumps = [m for m in messages if m.startswith("sparkfleet-test watchdog timeout: Python stacks")]
    assert dumps, messages
    dump = dumps[0]
    for thread in threads:
        assert f"--- thread {thread.name!r} (ident {thread.ident}) ---" in dump
    main = threading.main_thread()
    assert f"--- thread {main.name!r} (ident {main.ident}) ---" in dump
    assert "in parked_in_a_test_thread" in dump
    assert "in _watchdog_once" in dump  # the watchdog's own thread is listed too
    # Logged before the original timeout message (and so before the py-spy call).
    first_timeout = next(i for i, m in enumerate(messages) if m.startswith(TIMEOUT_MESSAGE))
    assert messages.index(dump) < first_timeout


@pytest.mark.parametrize("version", WATCHDOG_RELEASES)
def test_unpatched_watchdog_leaves_no_stack(version, tmp_path, clean_import):
    root = write_tree(tmp_path, {releases.WATCHDOG: watchdog(version)})
    module = upstream.load_watchdog(root)
    threads, messages = run_watchdog_until_timeout(module)
    assert messages
    for thread in threads:
        assert all(thread.name not in m for m in messages)
    assert all("Python stacks" not in m and "--- thread" not in m for m in messages)


@pytest.mark.parametrize("version", PRE_WATCHDOG_RELEASES)
def test_watchdog_absent_before_0_5_7(version):
    assert releases.read(version, releases.WATCHDOG) is None


@pytest.mark.parametrize(
    "old, new, expected",
    [
        pytest.param(
            "def _watchdog_once(",
            "def _watchdog_step(",
            "cannot find method WatchdogRaw._watchdog_once in /x/watchdog.py",
            id="renamed",
        ),
        pytest.param(
            "        pyspy_dump_schedulers()\n",
            "",
            "cannot find the py-spy dump call 'pyspy_dump_schedulers()' after the wait loop "
            "in WatchdogRaw._watchdog_once of /x/watchdog.py",
            id="no-pyspy",
        ),
        pytest.param(
            "                        break\n",
            "                        return\n",
            "cannot find the wait loop ('while ...: ... break') "
            "in WatchdogRaw._watchdog_once of /x/watchdog.py",
            id="no-wait-loop",
        ),
        pytest.param(
            "logger = logging.getLogger(__name__)\n",
            "log = logging.getLogger(__name__)\n",
            "cannot find a module-level 'logger = ...' in /x/watchdog.py",
            id="no-logger",
        ),
    ],
)
@pytest.mark.parametrize("version", ["0.5.7", "0.5.23"])
def test_stack_dump_fails_on_drifted_file(version, old, new, expected):
    src = watchdog(version)
    assert old in src
    with pytest.raises(_patch.PatchError) as err:
        _patch.apply_patches(src.replace(old, new), [STACK_DUMP], path="/x/watchdog.py")
    assert str(err.value) == f"watchdog_stack_dump: {expected}"


@pytest.mark.parametrize("version", releases.RELEASES)
def test_patch_for_another_file_fails_with_the_anchor_named(version):
    with pytest.raises(_patch.PatchError, match=r"^watchdog_stack_dump: cannot find class Watch"):
        _patch.apply_patches(tokenizer_manager(version), [STACK_DUMP], path="tm.py")


# --- sm12x_gate ---------------------------------------------------------------

GATE_CASES = [
    ("cap == (12, 0)", "cap[0] == 12"),
    ("(12, 0) == cap", "cap[0] == 12"),
    ("cap != (12, 0)", "cap[0] != 12"),
    ("get_cap() == (12, 0)", "get_cap()[0] == 12"),
    ("(a or b) == (12, 0)", "(a or b)[0] == 12"),
    ("major == 12 and minor == 0", "major == 12"),
    ("minor == 0 and major == 12", "major == 12"),
    ("ok and cc_major == 12 and cc_minor == 0", "ok and cc_major == 12"),
    ("c.major == 12 and c.minor == 0 and (a or b)", "c.major == 12 and (a or b)"),
    ("cap[0] == 12 and cap[1] == 0", "cap[0] == 12"),
]
NOT_GATES = [
    "cuda_version >= (12, 0)",
    "cap == (12, 1)",
    "cap == (12, 0, 1)",
    "cap in {(12, 0), (12, 1)}",
    "major == 12 and minor == 1",
    "major == 12 or minor == 0",
    "a[0] == 12 and b[1] == 0",
    "cap == (True, 0)",
    "x == 12 and y == 0",
]


@pytest.mark.parametrize("expr, rewritten", GATE_CASES)
def test_gate_forms_are_rewritten_to_the_major(expr, rewritten):
    params = "cap, major, minor, c, cc_major, cc_minor, ok, a, b, get_cap"
    src = f"def gate({params}):\n    return {expr}\n"
    gates = _patch.find_sm12x_gates(src)
    assert list(gates) == [(2, expr, rewritten)]
    out = _patch.apply_patches(src, [GATE]).text
    assert out.splitlines()[1:] == [
        "    # HARDEN-PATCH sm12x_gate: exact (12, 0) gate widened to SM12x (GB10 reports (12, 1))",
        f"    return {rewritten}",
    ]


@pytest.mark.parametrize("expr", NOT_GATES)
def test_other_comparisons_are_not_gates(expr):
    src = f"x = {expr}\n"
    assert _patch.find_sm12x_gates(src) == []
    with pytest.raises(_patch.PatchError, match=r"^sm12x_gate: cannot find an exact \(12, 0\)"):
        _patch.apply_patches(src, [GATE], path="/x/snippet.py")


@pytest.mark.parametrize("cap", [(12, 0), (12, 1), (12, 9), (9, 0), (10, 0), (11, 0), (8, 9)])
def test_rewritten_gate_admits_the_sm12x_family_only(cap):
    for expr, rewritten in GATE_CASES[:3]:
        env = {"cap": cap}
        before, after = eval(expr, env), eval(rewritten, env)
        if cap[0] == 12:
            assert after is ("!=" not in expr)
        else:
            assert after == before


def _function_from(text, name, env):
    """Exec one top-level function of ``text`` (decorators dropped) in ``env``."""
    tree = ast.parse(text)
    func = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    func.decorator_list = []
    func.returns = None
    code = compile(ast.Module(body=[func], type_ignores=[]), "<gate>", "exec")
    exec(code, env)
    return env[name]


def _fake_torch(cap):
    cuda = types.SimpleNamespace(get_device_capability=lambda *args: cap)
    return types.SimpleNamespace(cuda=cuda)


@pytest.mark.parametrize("cap, expected", [((12, 0), True), ((12, 1), True), ((9, 0), False)])
def test_gate_in_real_common_py_admits_gb10(cap, expected):
    src = original(GATE_RELEASE, COMMON)
    result = _patch.apply_patches(src, [GATE], path=COMMON)
    assert only_insertions(src, result.text) is False  # one line rewritten, one added
    assert result.text.count("HARDEN-PATCH sm12x_gate") == 1
    env = {"is_cuda": lambda: True, "torch": _fake_torch(cap)}
    before = _function_from(src, "is_sm120", dict(env))
    after = _function_from(result.text, "is_sm120", dict(env))
    assert before() is (cap == (12, 0))
    assert after() is expected


@pytest.mark.parametrize("cap, raises", [((12, 1), False), ((12, 0), False), ((10, 0), True)])
def test_gate_in_real_skinny_gemm_admits_gb10(cap, raises, monkeypatch):
    src = original(GATE_RELEASE, SKINNY_GEMM)
    text = _patch.apply_patches(src, [GATE], path=SKINNY_GEMM).text
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(cap))
    env = {"load_jit": lambda *a, **k: "module", "_cuda_source": lambda path: path}
    func = _function_from(text, "_jit_sm120_fp8_skinny_module", env)
    if raises:
        with pytest.raises(RuntimeError, match="requires CUDA SM120"):
            func()
    else:
        assert func() == "module"
    unpatched = _function_from(src, "_jit_sm120_fp8_skinny_module", dict(env))
    if cap == (12, 1):
        with pytest.raises(RuntimeError):
            unpatched()


@pytest.mark.parametrize(
    "member, count, rewritten",
    [
        (COMMON, 1, "return is_cuda() and torch.cuda.get_device_capability()[0] == 12"),
        (SKINNY_GEMM, 1, "if torch.cuda.get_device_capability()[0] != 12:"),
        (NVFP4_GEMM, 1, "and torch.cuda.get_device_capability(device)[0] == 12"),
        (SANA, 1, "elif major == 12:"),
    ],
)
def test_gate_in_real_files_is_idempotent(member, count, rewritten):
    src = original(GATE_RELEASE, member)
    assert len(_patch.find_sm12x_gates(src, member)) == count
    result = _patch.apply_patches(src, [GATE], path=member)
    compile(result.text, member, "exec")
    assert rewritten in [line.strip() for line in result.text.splitlines()]
    assert _patch.find_sm12x_gates(result.text, member) == []
    # Only the gate lines differ; everything else is byte-identical.
    before, after = src.splitlines(True), result.text.splitlines(True)
    changed = [line for line in after if line not in before]
    assert len(changed) == 1 + count and len(after) == len(before) + 1
    again = _patch.apply_patches(result.text, [GATE], path=member)
    assert again.text == result.text and again.already_present == [GATE]


@pytest.mark.parametrize("version", releases.RELEASES)
def test_no_gate_in_tokenizer_manager(version):
    with pytest.raises(_patch.PatchError) as err:
        _patch.apply_patches(tokenizer_manager(version), [GATE], path="/x/tm.py")
    assert str(err.value).startswith(
        "sm12x_gate: cannot find an exact (12, 0) compute-capability gate"
    )
    assert str(err.value).endswith(" in /x/tm.py")


def test_gate_rewrite_counts_utf8_columns():
    src = 'label = "µ-arch ✓" if cap == (12, 0) else "other"\n'
    out = _patch.apply_patches(src, [GATE]).text
    assert out.splitlines()[1] == 'label = "µ-arch ✓" if cap[0] == 12 else "other"'


def test_gate_multiline_and_in_decorated_statements():
    src = (
        "@skip_if(\n"
        "    torch.cuda.get_device_capability()\n"
        "    != (12, 0),\n"
        "    reason='sm120',\n"
        ")\n"
        "def test():\n"
        "    if (major == 12\n"
        "            and minor == 0):  # keep\n"
        "        pass\n"
    )
    out = _patch.apply_patches(src, [GATE]).text
    compile(out, "<x>", "exec")
    assert "torch.cuda.get_device_capability()[0] != 12," in out
    assert "    if (major == 12):  # keep\n" in out
    assert out.count("HARDEN-PATCH sm12x_gate") == 2


# --- shared behaviour ---------------------------------------------------------


def test_all_or_nothing_when_one_anchor_is_missing():
    src = tokenizer_manager("0.5.23")
    with pytest.raises(_patch.PatchError, match=r"^sm12x_gate: "):
        _patch.apply_patches(src, [CLAMP, GATE], path="tm.py")


def test_src_with_one_marker_gets_only_the_missing_patch():
    src = (
        "class A:\n    pass\n\n# HARDEN-PATCH max_tokens_clamp: done earlier\nok = cap == (12, 0)\n"
    )
    result = _patch.apply_patches(src, [CLAMP, GATE, CLAMP])
    assert result.applied == [CLAMP, GATE]
    assert result.already_present == [CLAMP]
    assert result.text.endswith("ok = cap[0] == 12\n")


def test_crlf_line_endings_are_kept():
    src = tokenizer_manager("0.5.9").replace("\n", "\r\n")
    text = _patch.apply_patches(src, [CLAMP]).text
    assert "\n" not in text.replace("\r\n", "")
    assert (
        text.replace("\r\n", "\n") == _patch.apply_patches(tokenizer_manager("0.5.9"), [CLAMP]).text
    )


def test_tabs_indentation_is_followed():
    src = (
        "class TokenizerManager:\n"
        "\tdef _validate_one_request(self, obj, input_ids):\n"
        '\t\tmax_new_tokens = obj.sampling_params.get("max_new_tokens")\n'
        "\t\treturn max_new_tokens\n"
    )
    text = _patch.apply_patches(src, [CLAMP]).text
    env = {}
    exec(compile(text, "<x>", "exec"), env)
    req = types.SimpleNamespace(sampling_params={"max_new_tokens": 3}, rid="r")
    assert env["TokenizerManager"]()._validate_one_request(req, []) == 16
    assert req.sampling_params == {"max_new_tokens": 16}
    assert "\n\t\tif (\n\t\t\tisinstance(max_new_tokens, int)\n" in text


def test_anchor_sharing_its_line_is_refused():
    src = (
        "class TokenizerManager:\n"
        "    def _validate_one_request(self, obj, input_ids):\n"
        '        x = 1; max_new_tokens = obj.sampling_params.get("max_new_tokens")\n'
    )
    with pytest.raises(_patch.PatchError, match="shares its line with other code"):
        _patch.apply_patches(src, [CLAMP], path="tm.py")


def test_marker_only_counts_in_comments():
    assert _patch.markers_in('x = "HARDEN-PATCH max_tokens_clamp"\n') == set()
    assert _patch.markers_in("x = 1  # HARDEN-PATCH max_tokens_clamp: yes\n") == {CLAMP}
    assert _patch.markers_in("# HARDEN-PATCH something_else\n") == set()
    assert _patch.marker(GATE) == "HARDEN-PATCH sm12x_gate"


@pytest.mark.parametrize(
    "names, min_new_tokens, message",
    [
        (["nope"], 16, "unknown patch 'nope'"),
        ([], 16, "no patch requested"),
        ([CLAMP], 0, "min_new_tokens must be at least 1"),
        ([CLAMP], True, "min_new_tokens must be an integer"),
        ([CLAMP], "16", "min_new_tokens must be an integer"),
    ],
)
def test_bad_arguments(names, min_new_tokens, message):
    with pytest.raises(ValueError, match=message):
        _patch.apply_patches("x = 1\n", names, min_new_tokens=min_new_tokens)


def test_unparsable_src_is_named():
    with pytest.raises(_patch.PatchError, match=r"^cannot parse /x/y.py as Python"):
        _patch.apply_patches("def (:\n", [CLAMP], path="/x/y.py")


def test_result_that_does_not_compile_is_refused():
    with pytest.raises(_patch.PatchError, match=r"^patched /x/y.py does not compile \(line 2\)"):
        _patch.check_compiles("x = 1\nreturn 2\n", "/x/y.py")


def test_sha256_hex():
    assert _patch.sha256_hex("") == _patch.sha256_hex(b"")
    assert _patch.sha256_hex(b"abc").startswith("ba7816bf")
