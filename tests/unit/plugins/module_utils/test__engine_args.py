"""The engine's own parser on a rank's launch arguments (module_utils/_engine_args.py): which
arguments a rank passes, what rendered each flag, the refusal's wording, the verdict cache,
and the parse itself run against the twin's stand-in server_args (a real release's flags)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

from ansible_collections.sparkfleet.serving.plugins.module_utils import (
    _engine,
    _engine_args,
    _profile_schema,
)

_UNIT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_REPO = os.path.dirname(os.path.dirname(_UNIT))
sys.path.insert(0, _UNIT)
import shipped_presets  # noqa: E402

FLAGS = _profile_schema.server_flags()
IMAGE = "lmsysorg/sglang:v0.5.17-cu130"
IMAGE_ID = "sha256:" + "ab" * 32


def rendered(extra_args=(), rank=1, api_key=False):
    """A preset's real launch arguments (what the launcher's command carries after the entry)."""
    profile = dict(shipped_presets.resolve("ds4f_flash0731_tp2_a_graphs_off"))
    profile["extra_args"] = list(extra_args)
    command = [
        *_engine.python_command(profile, api_key_set=api_key),
        *_engine.server_args(profile, rank, "10.0.40.1"),
    ]
    return command, _engine_args.server_argv(command)


# --- the arguments a rank passes --------------------------------------------------------


def test_server_argv_of_the_module_entry():
    command, argv = rendered()
    assert argv == command[command.index("sglang.launch_server") + 1 :]
    assert "--model-path" in argv


def test_server_argv_of_the_api_key_shim_stands_a_placeholder_for_the_key():
    command, argv = rendered(api_key=True)
    assert "-c" in command
    assert argv[:2] == ["--api-key", _engine_args.API_KEY_PLACEHOLDER]
    assert argv[2:] == command[command.index("-c") + 2 :]


@pytest.mark.parametrize("command", [[], ["python3"], ["/bin/sh", "-e", "run.sh"]])
def test_server_argv_of_another_command_is_none(command):
    assert _engine_args.server_argv(command) is None


# --- what rendered each flag ------------------------------------------------------------


def test_every_profile_flag_maps_back_to_its_field():
    _command, argv = rendered(extra_args=["--enable-p2p-check", "--context-length", "4096"])
    sources = {flag: source for _i, flag, source in _engine_args.flag_sources(argv, FLAGS)}
    assert sources["--mem-fraction-static"] == "the profile field mem_fraction_static"
    assert sources["--trust-remote-code"] == "the profile field trust_remote_code"
    assert sources["--tp-size"] == "the profile field tp_size"
    assert sources["--node-rank"] == "spark_rank (the node's rank)"
    assert sources["--dist-init-addr"].startswith("rank 0's roce_ipv4")
    # Appended after the profile's own: extra_args, even a flag a field could render.
    assert sources["--enable-p2p-check"] == "the profile field extra_args"
    assert [s for _i, f, s in _engine_args.flag_sources(argv, FLAGS) if f == "--context-length"][
        -1
    ] == "the profile field extra_args"


def test_the_api_keys_flag_is_the_variables():
    _command, argv = rendered(api_key=True)
    first = _engine_args.flag_sources(argv, FLAGS)[0]
    assert first == (0, "--api-key", "the variable sglang_api_key")


# --- the refusal ------------------------------------------------------------------------


def test_unrecognized_arguments_are_named_with_their_values_and_fields():
    _command, argv = rendered(extra_args=["--no-such-flag"])
    answer = {
        "refused": "unrecognized arguments: --trust-remote-code --mem-fraction-static 0.80 "
        "--no-such-flag",
        "unknown": ["--trust-remote-code", "--mem-fraction-static", "0.80", "--no-such-flag"],
    }
    assert _engine_args.refused_arguments(argv, FLAGS, answer) == [
        ("--trust-remote-code", "the profile field trust_remote_code"),
        ("--mem-fraction-static 0.80", "the profile field mem_fraction_static"),
        ("--no-such-flag", "the profile field extra_args"),
    ]
    message = _engine_args.refusal(IMAGE, IMAGE_ID, argv, FLAGS, answer)
    assert message.startswith(
        f"the engine in image {IMAGE} (sha256:abababababab) refuses --trust-remote-code (the "
        "profile field trust_remote_code); --mem-fraction-static 0.80 (the profile field "
        "mem_fraction_static); --no-such-flag (the profile field extra_args): its own parser "
        "says 'launch_server: error: unrecognized arguments: --trust-remote-code "
        "--mem-fraction-static 0.80 --no-such-flag'"
    )
    assert "sglang_profile_overrides" in message


def test_an_invalid_value_names_its_argument_and_field():
    _command, argv = rendered()
    answer = {
        "refused": "argument --tensor-parallel-size/--tp-size: invalid int value: 'two'",
    }
    assert _engine_args.refused_arguments(argv, FLAGS, answer) == [
        ("--tp-size 2", "the profile field tp_size")
    ]


def test_an_ambiguous_abbreviation_names_its_argument_and_field():
    """0.5.23 has --cuda-graph-max-bs-decode and -prefill: the old flag is now a prefix of both."""
    argv = ["--model-path", "/m", "--cuda-graph-max-bs", "32", "--port", "30000"]
    answer = {
        "refused": "ambiguous option: --cuda-graph-max-bs could match "
        "--cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill"
    }
    assert _engine_args.refused_arguments(argv, FLAGS, answer) == [
        ("--cuda-graph-max-bs 32", "the profile field cuda_graph_max_bs")
    ]


def test_a_missing_required_argument_names_the_field_that_renders_it():
    answer = {"refused": "the following arguments are required: --model-path"}
    assert _engine_args.refused_arguments(["--tp-size", "2"], FLAGS, answer) == [
        ("--model-path", "the profile field model_path, which renders none")
    ]


@pytest.mark.parametrize(
    "stdout, answer",
    [
        ('noise\nsparkfleet-argcheck: {"ok": true}\n', {"ok": True}),
        ('sparkfleet-argcheck: {"refused": "x"}', {"refused": "x"}),
        ('sparkfleet-argcheck: {"unavailable": "E: y"}', {"unavailable": "E: y"}),
        ("Traceback (most recent call last):\n", None),
        ("sparkfleet-argcheck: not json", None),
        ("", None),
    ],
)
def test_verdict(stdout, answer):
    assert _engine_args.verdict(stdout) == answer


# --- the cache --------------------------------------------------------------------------


def test_cache_key_follows_the_image_and_the_arguments():
    _command, argv = rendered()
    key = _engine_args.cache_key(IMAGE_ID, argv)
    assert key == _engine_args.cache_key(IMAGE_ID, list(argv))
    assert key != _engine_args.cache_key("sha256:" + "cd" * 32, argv)
    assert key != _engine_args.cache_key(IMAGE_ID, [*argv, "--enable-p2p-check"])
    assert key != _engine_args.cache_key(IMAGE_ID, argv[:-1])


def test_remember_and_recall(tmp_path):
    path = str(tmp_path / "engine-args.json")
    assert _engine_args.recall(path, "k1") is None
    assert _engine_args.remember(path, "k1", IMAGE_ID, {"ok": True}, 2)
    assert _engine_args.remember(path, "k2", IMAGE_ID, {"refused": "x"}, 2)
    assert _engine_args.recall(path, "k1") == {"ok": True}
    assert _engine_args.recall(path, "k2") == {"refused": "x"}
    _engine_args.remember(path, "k3", IMAGE_ID, {"ok": True}, 2)
    assert _engine_args.recall(path, "k1") is None  # the oldest goes
    (tmp_path / "engine-args.json").write_text("{not json")
    assert _engine_args.recall(path, "k3") is None
    (tmp_path / "a-file").write_text("")
    assert not _engine_args.remember(str(tmp_path / "a-file" / "x.json"), "k", IMAGE_ID, {}, 2)


def test_the_throwaway_container_has_no_network_and_is_removed():
    argv = _engine_args.docker_argv("python3", IMAGE_ID, ["--tp-size", "2"], "r1-argcheck-1")
    assert argv[:2] == ["run", "--rm"]
    assert argv[argv.index("--network") + 1] == "none"
    assert argv[argv.index("--entrypoint") + 1] == "python3"
    assert "--gpus" not in argv and "-v" not in argv and "--env-file" not in argv
    assert argv[-5:] == [IMAGE_ID, "-c", _engine_args.PARSE, "--tp-size", "2"]


# --- the parse itself, against the stand-in's server_args -------------------------------


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    """The stand-in's sglang.srt.server_args on 0.5.12's real flags, less --mem-fraction-static."""
    sys.path.insert(0, os.path.join(_REPO, "twin", "engine"))
    import extract
    import sglang_releases

    root = tmp_path_factory.mktemp("standin")
    shutil.copytree(os.path.join(_REPO, "twin", "engine", "sparksim"), root / "sparksim")
    (root / "sglang" / "srt").mkdir(parents=True)
    shutil.copy(os.path.join(_REPO, "twin", "engine", "sglang", "__init__.py"), root / "sglang")
    shutil.copy(
        os.path.join(_REPO, "twin", "engine", "sglang", "srt", "server_args.py"),
        root / "sglang" / "srt",
    )
    with zipfile.ZipFile(sglang_releases.wheel("0.5.12")) as wheel:
        flags = extract.server_flags(wheel.read(extract.SERVER_ARGS).decode())
    flags = [f for f in flags if "--mem-fraction-static" not in f["names"]]
    (root / "flags.json").write_text(json.dumps(flags))  # sparksim.args' FLAGS_JSON
    return root


def parse(root, argv):
    out = subprocess.run(
        [sys.executable, "-c", _engine_args.PARSE, *argv],
        capture_output=True,
        text=True,
        env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(root)},
        check=False,
        timeout=60,
    )
    return _engine_args.verdict(out.stdout)


def test_the_parse_accepts_what_the_release_declares(standin):
    _command, argv = rendered()
    argv = [a for a in argv if a not in ("--mem-fraction-static", "0.80", "0.8")]
    assert parse(standin, argv) == {"ok": True}


def test_the_parse_refuses_in_argparses_own_words(standin):
    _command, argv = rendered(api_key=True)
    answer = parse(standin, argv)
    assert answer["unknown"] == ["--mem-fraction-static", "0.80"]
    assert answer["refused"] == "unrecognized arguments: --mem-fraction-static 0.80"
    assert _engine_args.refused_arguments(argv, FLAGS, answer) == [
        ("--mem-fraction-static 0.80", "the profile field mem_fraction_static")
    ]


def test_the_parse_names_an_invalid_choice(standin):
    answer = parse(standin, ["--model-path", "/m", "--speculative-algorithm", "NOPE"])
    assert answer["refused"].startswith("argument --speculative-algorithm: invalid choice: 'NOPE'")


def test_a_parse_without_the_module_is_unavailable(tmp_path):
    answer = parse(tmp_path, ["--model-path", "/m"])
    assert answer["unavailable"].startswith("ModuleNotFoundError")
