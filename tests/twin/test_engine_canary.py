"""The stand-in's canary behaviours: seed 000's per-profile stall, wrong answers, and
the release's own SM120 gate against a simulated GB10 (compute capability 12.1)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from twin_helpers import (
    PORT,
    PREFIX,
    ROOT,
    chat,
    container_state,
    docker,
    logs,
    remove_containers,
    request,
    wait_for,
)

GATE_VERSION = "0.5.23"
GATE_IMAGE = f"sparkfleet-twin/sglang:{GATE_VERSION}"
COMMON = "/sgl-workspace/sglang/python/sglang/srt/utils/common.py"
REFUSED = "is_sm120() in sglang/srt/utils/common.py returns False on compute capability 12.1"


@pytest.fixture(scope="module")
def gate_image(engine_images):
    subprocess.run([str(ROOT / "twin/engine/build.sh"), "--version", GATE_VERSION], check=True)
    return GATE_IMAGE


@pytest.fixture(scope="module")
def ds4_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("ds4")
    (path / "config.json").write_text(
        json.dumps({"architectures": ["DeepseekV4ForCausalLM"], "max_position_embeddings": 8192})
    )
    path.chmod(0o755)
    return path


@pytest.fixture(scope="module")
def patched_common(gate_image, tmp_path_factory):
    """The image's common.py through the collection's real sm12x_gate patch."""
    sys.path.insert(0, str(ROOT / ".collections"))
    from ansible_collections.sparkfleet.serving.plugins.module_utils import _patch

    original = docker("run", "--rm", gate_image, "cat", COMMON).stdout
    patched = _patch.apply_patches(original, ["sm12x_gate"], COMMON).text
    path = tmp_path_factory.mktemp("common") / "common.py"
    path.write_text(patched)
    path.chmod(0o644)
    return path


@pytest.fixture
def start(ds4_dir):
    names = []

    def run(name, image, env=(), mounts=(), wait=True):
        full = f"{PREFIX}-{name}"
        names.append(full)
        cmd = ["run", "-d", "--name", full, "-v", f"{ds4_dir}:/models/ds4:ro"]
        for host, target in mounts:
            cmd += ["-v", f"{host}:{target}:ro"]
        for key, value in {"SPARKSIM_BOOT_S": "0.3", **dict(env)}.items():
            cmd += ["-e", f"{key}={value}"]
        cmd += [image, "python3", "-m", "sglang.launch_server", "--model-path", "/models/ds4"]
        cmd += ["--host", "0.0.0.0", "--port", str(PORT), "--tp-size", "1"]
        cmd += ["--watchdog-timeout", "2", "--served-model-name", "flash-0731"]
        docker(*cmd)
        ip = docker("inspect", "-f", "{{.NetworkSettings.IPAddress}}", full).stdout.strip()
        url = f"http://{ip}:{PORT}"
        if wait and not wait_for(lambda: request(f"{url}/health", timeout=3)[0] == 200, 30):
            raise AssertionError(f"{full} never became healthy:\n{logs(full)[-3000:]}")
        return full, url

    yield run
    remove_containers(names)


def test_exact_sm120_gate_refuses_gb10(start, gate_image):
    name, _url = start(
        "gate-refused", gate_image, {"SPARKSIM_DEVICE_CAPABILITY": "12.1"}, wait=False
    )
    assert wait_for(lambda: not container_state(name)[0], 20)
    assert container_state(name)[1] == 1
    assert REFUSED in logs(name)


def test_gate_accepts_rtx_blackwell_unpatched(start, gate_image):
    name, _url = start("gate-sm120", gate_image, {"SPARKSIM_DEVICE_CAPABILITY": "12.0"})
    assert "is_sm120() in sglang/srt/utils/common.py accepts it" in logs(name)


def test_sm12x_patch_lets_gb10_boot(start, gate_image, patched_common):
    name, url = start(
        "gate-patched",
        gate_image,
        {"SPARKSIM_DEVICE_CAPABILITY": "12.1"},
        mounts=[(patched_common, COMMON)],
    )
    assert "accepts it" in logs(name)
    assert chat(url, "What is 17*19?", 16)[0] == 200


def test_release_without_the_gate_boots(start, engine_images):
    name, _url = start("nogate", engine_images["timestamp"], {"SPARKSIM_DEVICE_CAPABILITY": "12.1"})
    assert "this release has no is_sm120() gate" in logs(name)


def test_stall_after_completions_ends_in_the_watchdog_kill(start, gate_image, patched_common):
    env = {"SPARKSIM_DEVICE_CAPABILITY": "12.1", "SPARKSIM_STALL_AFTER": "2"}
    name, url = start("stall", gate_image, env, mounts=[(patched_common, COMMON)])
    for _ in range(2):
        status, body = chat(url, "What is 17*19?", 16)
        assert status == 200 and json.loads(body)["choices"][0]["message"]["content"] == "323"
    assert chat(url, "What is 17*19?", 16, timeout=30)[0] == 0
    assert wait_for(lambda: not container_state(name)[0], 15)
    assert container_state(name)[1] == 137
    assert "Scheduler watchdog timeout (self.watchdog_timeout=2.0" in logs(name)


def test_wrong_tokens_fail_exact_and_math(start, gate_image, patched_common):
    env = {"SPARKSIM_DEVICE_CAPABILITY": "12.1", "SPARKSIM_WRONG_TOKENS": "1"}
    _name, url = start("wrong", gate_image, env, mounts=[(patched_common, COMMON)])
    answer = json.loads(chat(url, "What is 17*19?", 16)[1])["choices"][0]["message"]["content"]
    assert answer == "324"
    prompt = "Reply with exactly this string and nothing else: CANARY-OK"
    answer = json.loads(chat(url, prompt, 16)[1])["choices"][0]["message"]["content"]
    assert answer == "CANARY-OL"
