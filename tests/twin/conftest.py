"""Fixtures for the engine-image tests (helpers live in twin_helpers.py)."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import random
import shutil
import subprocess

import pytest
from twin_helpers import (
    BASE_IMAGE,
    IMAGE,
    IMAGE_UNCHECKED,
    PREFIX,
    ROOT,
    TM_PATH,
    WD_PATH,
    Cluster,
    clamp_patch,
    docker,
    remove_containers,
    stack_dump_patch,
)


@pytest.fixture(scope="session")
def engine_images():
    """Both engine images, built (or found current) by twin/engine/build.sh."""
    if shutil.which("docker") is None or docker("info", check=False).returncode != 0:
        pytest.fail("the twin engine tests need a running docker daemon")
    if docker("image", "inspect", BASE_IMAGE, check=False).returncode != 0:
        subprocess.run([str(ROOT / "twin/images/build.sh"), "base"], check=True)
    for mode in ("timestamp", "unchecked-hash"):
        subprocess.run([str(ROOT / "twin/engine/build.sh"), "--pyc-mode", mode], check=True)
    yield {"timestamp": IMAGE, "unchecked-hash": IMAGE_UNCHECKED}
    leftovers = docker(
        "ps", "-a", "--format", "{{.Names}}", "--filter", f"name=^/{PREFIX}-", check=False
    ).stdout.split()
    remove_containers(leftovers)


@pytest.fixture(scope="session")
def patched_files(engine_images, tmp_path_factory):
    """Originals from the image, and test-patched copies, as host paths."""
    out = tmp_path_factory.mktemp("patches")
    files = {}
    for key, path in (("tm", TM_PATH), ("wd", WD_PATH)):
        original = docker("run", "--rm", IMAGE, "cat", path).stdout
        (out / f"{key}.orig.py").write_text(original)
        files[f"{key}_orig"] = out / f"{key}.orig.py"
    files["tm_clamp"] = out / "tokenizer_manager.py"
    files["tm_clamp"].write_text(clamp_patch(files["tm_orig"].read_text()))
    files["wd_dump"] = out / "watchdog.py"
    files["wd_dump"].write_text(stack_dump_patch(files["wd_orig"].read_text()))
    files["empty"] = out / "empty.pyc"
    files["empty"].write_bytes(b"")
    for path in files.values():
        path.chmod(0o644)
    return files


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("model")
    (path / "config.json").write_text(
        json.dumps({"architectures": ["Qwen3ForCausalLM"], "max_position_embeddings": 40960})
    )
    path.chmod(0o755)
    return path


def _create_network(name, mtu=None):
    options = ["--opt", f"com.docker.network.driver.mtu={mtu}"] if mtu else []
    for _ in range(40):
        subnet = ipaddress.ip_network(
            f"10.{random.randint(160, 250)}.{random.randint(0, 255)}.0/24"
        )
        proc = docker("network", "create", "--subnet", str(subnet), *options, name, check=False)
        if proc.returncode == 0:
            return subnet
        if "overlap" not in proc.stderr and "already" not in proc.stderr:
            raise RuntimeError(proc.stderr)
    raise RuntimeError(f"no free subnet for {name}")


@pytest.fixture(scope="module")
def planes(engine_images, request):
    """A management and a RoCE (MTU 9000) network for this module's nodes."""
    tag = request.module.__name__.rsplit(".", 1)[-1].replace("_", "-")
    names = {"mgmt": f"{PREFIX}-{tag}-mgmt", "roce": f"{PREFIX}-{tag}-roce"}
    subnets = {}
    try:
        subnets["mgmt"] = _create_network(names["mgmt"])
        subnets["roce"] = _create_network(names["roce"], mtu=9000)
        yield {"names": names, "subnets": subnets, "slots": iter(range(1, 24))}
    finally:
        for name in names.values():
            docker("network", "rm", name, check=False)


@pytest.fixture
def cluster_factory(planes, tmp_path, model_dir):
    """Build clusters for one test; all their containers are removed afterwards."""
    made = []

    def make(name, **kwargs):
        kwargs.setdefault("model_dir", model_dir)
        cluster = Cluster(planes, tmp_path / name, name, **kwargs)
        made.append(cluster)
        return cluster

    yield make
    for cluster in made:
        with contextlib.suppress(Exception):
            cluster.remove()
