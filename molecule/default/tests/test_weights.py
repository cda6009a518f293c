"""Verify the weights staged by site.yml on the 4-node twin: real files, keys, the engine."""

from __future__ import annotations

import json

import pytest
from twin_verify import inventory, node

NODES = inventory("inventory/sim")
NAMES = sorted(NODES, key=lambda h: NODES[h]["spark_rank"])
HEAD = NAMES[0]
REPO = "RadixArk/Qwen3.8-27B-NVFP4-BF16-LMHead"
DRAFT = "z-lab/Qwen3.8-27B-DFlash2"
REV = "831ef89418185caf007200f207be19b8b92d7e21"
DRAFT_REV = "4ac209fd791f3af942643f3f12b5bd90679a899a"
MODELS = "/home/tiger/models"
STORE = f"{MODELS}/.sparkfleet-weights"
MODEL_PATH = f"{MODELS}/{REPO}"
SNAPSHOT = (
    f"/home/tiger/.cache/huggingface/hub/models--z-lab--Qwen3.8-27B-DFlash2/snapshots/{DRAFT_REV}"
)
TEMPLATE = "/home/tiger/.config/qwen38/chat-template-sglang.jinja"
KEY = "/etc/sparkfleet/ssh/weights_ed25519"


def sha256_of(host, path):
    return host.check_output(f"sha256sum {path} | cut -d' ' -f1")


@pytest.mark.parametrize("name", NAMES)
def test_model_path_is_the_pinned_verified_revision(name):
    host = node(name)
    link = host.file(MODEL_PATH)
    assert link.is_symlink
    assert link.linked_to == f"{STORE}/RadixArk--Qwen3.8-27B-NVFP4-BF16-LMHead/{REV}"
    manifest = json.loads(host.file(f"{MODEL_PATH}/.sparkfleet-manifest.json").content_string)
    assert (manifest["repo"], manifest["revision"], manifest["commit"]) == (REPO, REV, REV)
    names = {f["path"] for f in manifest["files"]}
    assert {
        "config.json",
        "model-00001-of-00002.safetensors",
        "chat-template-sglang.jinja",
    } <= names
    for entry in manifest["files"]:
        assert sha256_of(host, f"{MODEL_PATH}/{entry['path']}") == entry["sha256"], entry
    # Nothing half-staged is left where a loader could look.
    assert (
        host.run(
            f"ls -a {STORE}/RadixArk--Qwen3.8-27B-NVFP4-BF16-LMHead | grep -c partial"
        ).stdout.strip()
        == "0"
    )


@pytest.mark.parametrize("name", NAMES)
def test_draft_is_in_the_hf_cache_layout_the_container_mounts(name):
    host = node(name)
    head = node(HEAD)
    manifest = json.loads(
        head.file(
            f"{STORE}/z-lab--Qwen3.8-27B-DFlash2/{DRAFT_REV}/.sparkfleet-manifest.json"
        ).content_string
    )
    for entry in manifest["files"]:
        path = f"{SNAPSHOT}/{entry['path']}"
        assert host.file(path).is_symlink
        assert host.file(path).linked_to.endswith(f"/blobs/{entry['etag']}")
        assert sha256_of(host, path) == entry["sha256"]


@pytest.mark.parametrize("name", NAMES)
def test_chat_template_from_the_model_repo_is_where_the_profile_mounts_it(name):
    host = node(name)
    assert host.file(TEMPLATE).mode == 0o644
    assert sha256_of(host, TEMPLATE) == sha256_of(host, f"{MODEL_PATH}/chat-template-sglang.jinja")


@pytest.mark.parametrize("name", NAMES)
def test_engine_boots_offline_from_the_staged_draft(name):
    host = node(name)
    rank = NODES[name]["spark_rank"]
    env = json.loads(
        host.check_output(f"docker inspect -f '{{{{json .Config.Env}}}}' qwen38-tp4-r{rank}")
    )
    assert "HF_HUB_OFFLINE=1" in env
    assert "HF_HUB_DISABLE_XET=1" in env
    assert f"SPARKFLEET_MODEL_REVISION={REV}" in env
    log = host.check_output(f"docker logs qwen38-tp4-r{rank} 2>&1")
    assert f"Draft model {DRAFT} loaded from the local cache" in log
    assert f"snapshots/{DRAFT_REV}" in log


def test_fanout_key_is_the_heads_own_and_host_keys_are_pinned():
    head = node(HEAD)
    assert head.file(KEY).mode == 0o600
    assert head.file("/etc/sparkfleet/ssh").mode == 0o700
    known = head.file("/etc/sparkfleet/ssh/known_hosts.weights").content_string.split("\n")
    known = [line for line in known if line]
    assert len(known) == len(NAMES) - 1
    for name in NAMES[1:]:
        hostkey = node(name).file("/etc/ssh/ssh_host_ed25519_key.pub").content_string.split()[:2]
        assert f"{NODES[name]['roce_ipv4']} {' '.join(hostkey)}" in known


@pytest.mark.parametrize("name", NAMES[1:])
def test_worker_authorizes_the_key_for_rrsync_under_the_store_only(name):
    host = node(name)
    keys = host.file("/root/.ssh/authorized_keys")
    assert keys.mode == 0o600
    lines = [
        line for line in keys.content_string.splitlines() if line.endswith(" sparkfleet-weights")
    ]
    assert len(lines) == 1
    line = lines[0]
    assert line.startswith("restrict,")
    assert f'from="{NODES[HEAD]["roce_ipv4"]},{NODES[HEAD]["ansible_host"]}"' in line
    assert f'command="/usr/bin/rrsync -wo -no-del -no-lock {STORE}"' in line
    pub = node(HEAD).file(f"{KEY}.pub").content_string.split()[:2]
    assert " ".join(pub) in line


@pytest.mark.parametrize("name", NAMES[1:])
def test_the_key_cannot_run_commands_or_read_outside_the_store(name):
    head = node(HEAD)
    peer = f"root@{NODES[name]['roce_ipv4']}"
    rsh = (
        f"ssh -i {KEY} -o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=yes "
        "-o UserKnownHostsFile=/etc/sparkfleet/ssh/known_hosts.weights"
    )
    shell = head.run(f"{rsh} {peer} id")
    assert shell.rc != 0 and "uid=" not in shell.stdout
    # rrsync -wo: the key may write but not read (no copying weights or /etc off a node).
    read = head.run(f"rsync -e '{rsh}' {peer}:/etc/shadow /tmp/x")
    assert read.rc != 0
    # A host key that is not the pinned one is refused (never trust on first use).
    other = head.run(
        f"ssh -i {KEY} -o BatchMode=yes -o StrictHostKeyChecking=yes "
        f"-o UserKnownHostsFile=/dev/null {peer} true"
    )
    assert other.rc != 0 and "Host key verification failed" in other.stderr


def test_the_client_is_pinned_in_its_virtualenv_and_the_token_private():
    head = node(HEAD)
    token = head.file("/opt/sparkfleet/hf-venv/hf-token")
    assert not token.exists or token.mode == 0o600
    stamp = head.file("/opt/sparkfleet/hf-venv/.sparkfleet-requirements").content_string
    assert "huggingface-hub==2.4.0" in stamp
    assert head.run("/opt/sparkfleet/hf-venv/bin/python -c 'import huggingface_hub'").rc == 0
