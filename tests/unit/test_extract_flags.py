"""twin/engine/extract.py over the real server_args.py (and arg_groups/) of SGLang releases:
every field layout the releases used is read, and the flags read match the declarations
counted apart from the reader (what makes the stand-in's image build fail otherwise)."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import zipfile

import pytest

_UNIT = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.dirname(os.path.dirname(_UNIT))
if _UNIT not in sys.path:
    sys.path.insert(0, _UNIT)

import sglang_releases as releases  # noqa: E402

_SPEC = importlib.util.spec_from_file_location(
    "twin_engine_extract", os.path.join(_REPO, "twin", "engine", "extract.py")
)
extract = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(extract)

# The patch tests' releases, and one of each layout between them: A[type, "help" | Arg()]
# fields of ServerArgs in server_args.py (0.5.14), the same with NS("group") after the help
# (0.5.17, where the extractor read 28 flags), fields in arg_groups/fields/ (0.5.20).
LAYOUT_RELEASES = ("0.5.14", "0.5.17", "0.5.20")
EXTRACT_RELEASES = tuple(sorted({*releases.RELEASES, *LAYOUT_RELEASES}, key=releases.version_tuple))
KNOWN = (
    "--model-path",
    "--trust-remote-code",
    "--mem-fraction-static",
    "--tp-size",
    "--nnodes",
    "--node-rank",
    "--dist-init-addr",
    "--served-model-name",
    "--context-length",
    "--watchdog-timeout",
    "--enable-metrics",
    "--host",
    "--port",
    "--api-key",
    "--speculative-algorithm",
    "--speculative-draft-model-path",
    "--speculative-num-draft-tokens",
)


def sources(version):
    """{member: text} of server_args.py and arg_groups/*.py of the release."""
    with zipfile.ZipFile(releases.wheel(version)) as wheel:
        return {
            name: wheel.read(name).decode()
            for name in wheel.namelist()
            if name == extract.SERVER_ARGS
            or (name.startswith(extract.ARG_FIELDS) and name.endswith(".py"))
        }


@pytest.fixture(scope="module", params=EXTRACT_RELEASES)
def release(request):
    flags, declared = extract.release_flags(sources(request.param))
    return request.param, flags, declared


def test_every_declaration_is_read(release):
    version, flags, declared = release
    assert declared > 200, f"{version}: only {declared} declarations counted"
    assert len(flags) == declared, f"{version}: read {len(flags)} of {declared}"


def test_known_flags_are_read(release):
    version, flags, _declared = release
    names = {name for flag in flags for name in flag["names"]}
    missing = [flag for flag in KNOWN if flag not in names]
    assert not missing, f"{version}: {missing}"


def test_no_flag_is_read_twice(release):
    _version, flags, _declared = release
    names = [name for flag in flags for name in flag["names"]]
    assert len(names) == len(set(names))


def test_types_and_switches(release):
    version, flags, _declared = release
    by_name = {name: flag for flag in flags for name in flag["names"]}
    assert by_name["--trust-remote-code"]["action"] == "store_true", version
    assert by_name["--mem-fraction-static"]["type"] == "float", version
    assert by_name["--tp-size"]["type"] == "int", version
    assert by_name["--tp-size"]["dest"] in (None, "tp_size"), version


@pytest.mark.parametrize(
    "field, counted, read",
    [
        ('x: A[int, "The x."] = 1', 1, ["--x"]),
        ('x: A[int, "The x.", NS("parallel")] = 1', 1, ["--x"]),
        ('x: A[int, NS("parallel"), "The x."] = 1', 1, ["--x"]),
        ('x: A[int, Arg(help="x", aliases=["--xx"]), NS("exec.moe")] = 1', 1, ["--x", "--xx"]),
        ('x: A[int, Arg(cli_name="--why")] = 1', 1, ["--why"]),
        ('x: A[int, "a " + "b"] = 1', 1, ["--x"]),
        ("x: A[int, Arg(no_cli=True)] = 1", 0, []),
        ('x: A[int, NS("parallel")] = 1', 0, []),
        ('x: A[int, Derived(fn="m.f")] = 1', 0, []),
        # A layout the reader does not know is counted, not read: the build fails on it.
        ('x: A[int, Help("The x.")] = 1', 1, []),
        ("x: int = 1", 0, []),
    ],
)
def test_field_layouts(field, counted, read):
    source = f"class ServerArgs:\n    {field}\n"
    assert extract.declarations(source) == counted
    assert [name for flag in extract.field_flags(source) for name in flag["names"]] == read


def test_add_argument_is_counted_and_read():
    source = (
        "class ServerArgs:\n"
        "    def add_cli_args(parser):\n"
        '        parser.add_argument("--x", type=int, default=1)\n'
        '        parser.add_argument("--y", action="store_true")\n'
        "        parser.add_argument(*names, **kwargs)\n"
    )
    assert extract.declarations(source) == 2
    assert [f["names"] for f in extract.server_flags(source)] == [["--x"], ["--y"]]


def test_extraction_fails_when_far_fewer_flags_are_read(tmp_path):
    """A release whose declarations the reader misses fails the extraction (and the build)."""
    layout = "".join(f'    f{i}: A[int, Help("f{i}")] = 1\n' for i in range(40))
    wheel = tmp_path / "sglang-9.9.9-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(extract.SERVER_ARGS, "class ServerArgs:\n" + layout)
        archive.writestr("sglang/srt/managers/tokenizer_manager.py", "")
    with pytest.raises(SystemExit) as ended:
        extract.main(["--wheel", str(wheel), "--out", str(tmp_path / "out")])
    assert "read 0 flags of the 40" in str(ended.value.code)


def test_extraction_writes_every_flag(tmp_path):
    out = tmp_path / "out"
    assert extract.main(["--wheel", releases.wheel("0.5.17"), "--out", str(out)]) == 0
    flags = json.loads((out / "sglang" / "flags.json").read_text())
    names = {name for flag in flags for name in flag["names"]}
    assert {"--trust-remote-code", "--mem-fraction-static"} <= names
    assert len(flags) == extract.release_flags(sources("0.5.17"))[1]
