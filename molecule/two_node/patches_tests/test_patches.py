"""Verify the clamp is live on a speculative twin whose image ships unchecked-hash bytecode."""

from __future__ import annotations

import json

from twin_verify import LAUNCHER, curl, inventory, node

NODES = inventory("inventory/sim-2node")
HEAD, WORKER = sorted(NODES, key=lambda h: NODES[h]["spark_rank"])
IMAGE = "sparkfleet-twin/sglang:0.5.9-unchecked-pyc"
TM = "/sgl-workspace/sglang/python/sglang/srt/managers/tokenizer_manager.py"
KEY = "patches-twin-key"


def test_the_image_bytecode_would_shadow_a_mounted_source():
    # Flags word of the pyc header: 0b01 = hash-based, not checked against the source.
    flags = node(HEAD).check_output(
        f"docker run --rm {IMAGE} python3 -c "
        "\"print(int.from_bytes(open('/sgl-workspace/sglang/python/sglang/srt/managers/__pycache__/"
        "tokenizer_manager.cpython-311.pyc','rb').read(8)[4:8],'little'))\""
    )
    assert flags == "1"


def test_the_marker_is_in_the_file_inside_every_rank():
    for name in (HEAD, WORKER):
        rank = NODES[name]["spark_rank"]
        assert (
            int(
                node(name).check_output(f"docker exec qwen38-tp4-r{rank} grep -c HARDEN-PATCH {TM}")
            )
            >= 1
        )


def test_a_max_tokens_8_request_answers_and_every_rank_survives():
    status, body = curl(
        node(HEAD),
        "http://127.0.0.1:8081/v1/chat/completions",
        key=KEY,
        body={
            "model": "qwen3.8-27b",
            "max_tokens": 8,
            "messages": [{"role": "user", "content": "hi"}],
        },
        timeout=30,
    )
    assert status == 200, body
    answer = json.loads(body)
    assert answer["choices"][0]["message"]["content"].strip()
    # The clamp raised the request to 16 tokens, above the 8-token draft window.
    assert answer["usage"]["completion_tokens"] > 8
    for name in (HEAD, WORKER):
        assert node(name).check_output(f"{LAUNCHER} status") == "running current"
