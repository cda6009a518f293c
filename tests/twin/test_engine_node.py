"""Single-node launches: the image, the command line, start-up checks, Pitfall 4."""

from __future__ import annotations

import importlib.util
import json
import socket
import subprocess
import time

import pytest
from twin_helpers import (
    IMAGE,
    IMAGE_UNCHECKED,
    PORT,
    PREFIX,
    READY_LINE,
    ROOT,
    TM_PATH,
    WD_PATH,
    chat,
    container_state,
    docker,
    logs,
    remove_containers,
    request,
    wait_for,
)

pytestmark = pytest.mark.usefixtures("engine_images")

DS4F_EAGLE = [
    "--tp-size", "1",
    "--max-running-requests", "6",
    "--mem-fraction-static", "0.80",
    "--context-length", "1048576",
    "--disable-cuda-graph",
    "--speculative-algorithm", "EAGLE",
    "--speculative-eagle-topk", "1",
    "--speculative-num-steps", "2",
    "--speculative-num-draft-tokens", "3",
    "--watchdog-timeout", "2",
]  # fmt: skip


def run_once(*argv, image=IMAGE, mounts=()):
    """Run the launch command to completion; (exit code, output)."""
    cmd = ["run", "--rm"]
    for host, target in mounts:
        cmd += ["-v", f"{host}:{target}:ro"]
    proc = docker(*cmd, image, "python3", "-m", "sglang.launch_server", *argv, check=False)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.fixture
def node(model_dir):
    """Start single-node servers on the default bridge; removed after the test."""
    names = []

    def start(name, *argv, env=None, image=IMAGE):
        full = f"{PREFIX}-{name}"
        names.append(full)
        cmd = ["run", "-d", "--name", full, "-v", f"{model_dir}:/models/tiny:ro"]
        for key, value in {"SPARKSIM_BOOT_S": "0.5", **(env or {})}.items():
            cmd += ["-e", f"{key}={value}"]
        cmd += [image, "python3", "--check-hash-based-pycs", "always", "-m"]
        cmd += ["sglang.launch_server", "--model-path", "/models/tiny"]
        cmd += ["--host", "0.0.0.0", "--port", str(PORT), *argv]
        docker(*cmd)
        ip = docker("inspect", "-f", "{{.NetworkSettings.IPAddress}}", full).stdout.strip()
        url = f"http://{ip}:{PORT}"
        if not wait_for(lambda: request(f"{url}/health", timeout=3)[0] == 200, 30):
            raise AssertionError(f"{full} never became healthy:\n{logs(full)[-3000:]}")
        return full, url

    yield start
    remove_containers(names)


def test_unknown_flag_exits_2():
    code, out = run_once("--model-path", "/tmp", "--no-such-flag", "1")
    assert code == 2
    assert "unrecognized arguments: --no-such-flag" in out


def parse_in_image(*argv, image=IMAGE):
    """The launcher check's parse (module_utils/_engine_args.PARSE) in a throwaway container."""
    spec = importlib.util.spec_from_file_location(
        "_engine_args", ROOT / "plugins" / "module_utils" / "_engine_args.py"
    )
    _engine_args = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(_engine_args)
    proc = docker(
        *_engine_args.docker_argv("python3", image, list(argv), f"{PREFIX}-argcheck"), check=False
    )
    return _engine_args.verdict(proc.stdout)


def test_the_engines_parser_accepts_the_releases_flags_and_refuses_others():
    """sglang.srt.server_args answers the parse the way the release would (no GPU, no network)."""
    rendered = ["--trust-remote-code", "--model-path", "/m", "--mem-fraction-static", "0.80",
                "--tp-size", "2", "--dist-init-addr", "10.0.0.1:23000"]  # fmt: skip
    assert parse_in_image(*rendered) == {"ok": True}
    answer = parse_in_image(*rendered, "--no-such-flag", "1")
    assert answer == {
        "refused": "unrecognized arguments: --no-such-flag 1",
        "unknown": ["--no-such-flag", "1"],
    }


def test_tp_size_must_divide_over_nodes():
    code, out = run_once("--model-path", "/tmp", "--tp-size", "3", "--nnodes", "2",
                         "--dist-init-addr", "10.0.0.1:23000")  # fmt: skip
    assert code == 1
    assert "tp_size must be divisible by number of nodes" in out


def test_node_rank_must_be_below_nnodes():
    code, out = run_once("--model-path", "/tmp", "--tp-size", "2", "--nnodes", "2",
                         "--node-rank", "2", "--dist-init-addr", "10.0.0.1:23000")  # fmt: skip
    assert code == 1
    assert "node_rank must be in [0, nnodes)" in out


def test_model_path_must_be_local():
    code, out = run_once("--model-path", "RadixArk/Qwen3.8-27B-NVFP4-BF16-LMHead")
    assert code == 1
    assert "We couldn't connect to 'https://huggingface.co'" in out
    assert "RadixArk/Qwen3.8-27B-NVFP4-BF16-LMHead" in out


@pytest.mark.parametrize(("image", "flags"), [(IMAGE, 0), (IMAGE_UNCHECKED, 1)])
def test_image_ships_real_files_with_pycs(image, flags):
    probe = (
        "import importlib.util as u, sys\n"
        "for src in sys.argv[1:]:\n"
        "    pyc = u.cache_from_source(src)\n"
        "    head = open(pyc, 'rb').read(8)\n"
        "    text = open(src).read()\n"
        "    real = 'class TokenizerManager' in text or 'class WatchdogRaw' in text\n"
        "    print(int.from_bytes(head[4:8], 'little'), real)\n"
    )
    out = docker("run", "--rm", image, "python3", "-c", probe, TM_PATH, WD_PATH).stdout.split()
    assert out == [str(flags), "True", str(flags), "True"]


def test_build_is_cached():
    tic = time.monotonic()
    subprocess.run([str(ROOT / "twin/engine/build.sh")], check=True, capture_output=True)
    assert time.monotonic() - tic < 2


def test_ds4f_eagle_profile(node):
    name, url = node("ds4f", *DS4F_EAGLE, "--served-model-name", "flash-0731")
    status, body = chat(url, "What is 17\u00d719?", 16)
    assert status == 200
    assert json.loads(body)["choices"][0]["message"]["content"] == "323"
    models = json.loads(request(f"{url}/v1/models")[1])
    assert models["data"][0]["max_model_len"] == 1048576
    status, _ = request(f"{url}/does-not-exist")
    assert status == 404
    assert READY_LINE in logs(name)
    # EAGLE with 2 steps / 3 draft tokens: max_tokens=3 is inside the window and wedges.
    assert chat(url, "hi", 3, timeout=20)[0] == 0
    assert wait_for(lambda: not container_state(name)[0], 15)
    assert container_state(name)[1] == 137


def _abort_stream(url):
    """Read two SSE events of a long stream, then drop the connection."""
    host, port = url.split("//")[1].split(":")
    body = json.dumps(
        {
            "messages": [{"role": "user", "content": "count from 1 to 500"}],
            "stream": True,
            "max_tokens": 500,
        }
    ).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(head.encode() + body)
        seen = b""
        while seen.count(b"data: ") < 2:
            seen += sock.recv(4096)
        assert seen.startswith(b"HTTP/1.1 200")


def test_client_abort_is_harmless_by_default(node):
    name, url = node("abort-ok", env={"SPARKSIM_DECODE_TPS": "20"})
    _abort_stream(url)
    time.sleep(1.5)
    assert container_state(name)[0]
    assert request(f"{url}/health")[0] == 200


def test_client_abort_crash_pitfall4(node):
    name, url = node("abort-crash", env={"SPARKSIM_DECODE_TPS": "20", "SPARKSIM_ABORT_CRASH": "1"})
    _abort_stream(url)
    assert wait_for(lambda: not container_state(name)[0], 15)
    assert container_state(name)[1] != 0
    text = logs(name)
    assert "aclose(): asynchronous generator is already running" in text
    assert "SIGQUIT received" in text
