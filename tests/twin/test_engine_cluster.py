"""Two simulated Sparks: rendezvous, GID check, NCCL bootstrap (Pitfall 1), API, API key."""

from __future__ import annotations

import concurrent.futures
import json
import re
import time

import pytest
from twin_helpers import (
    DIST_PORT,
    READY_LINE,
    ROCE_IF,
    chat,
    docker,
    request,
    wait_for,
)

QWEN_FLAGS = [
    "--trust-remote-code",
    "--mem-fraction-static", "0.50",
    "--attention-backend", "flashinfer",
    "--chunked-prefill-size", "8192",
    "--kv-cache-dtype", "fp8_e4m3",
    "--disable-prefill-cuda-graph",
    "--cuda-graph-max-bs", "8",
    "--disable-flashinfer-autotune",
    "--speculative-algorithm", "DFLASH",
    "--speculative-draft-model-path", "z-lab/Qwen3.8-27B-DFlash2",
    "--speculative-draft-model-revision", "50307d4c4cde6860d4eee73e2547cd786fe8e8a4",
    "--speculative-num-draft-tokens", "8",
    "--speculative-draft-model-quantization", "unquant",
    "--mamba-radix-cache-strategy", "extra_buffer",
    "--mamba-ssm-dtype", "bfloat16",
    "--max-mamba-cache-size", "96",
    "--max-running-requests", "4",
    "--enable-torch-compile",
    "--torch-compile-max-bs", "4",
    "--num-continuous-decode-steps", "2",
    "--watchdog-timeout", "2",
    "--reasoning-parser", "qwen3",
    "--tool-call-parser", "qwen3_coder",
    "--enable-metrics",
]  # fmt: skip
KEY = "sk-twin-test"


@pytest.fixture(scope="module")
def healthy(planes, tmp_path_factory, model_dir):
    """A 2-node DFlash2 cluster with an API key, brought up worker first."""
    from twin_helpers import Cluster

    cluster = Cluster(
        planes,
        tmp_path_factory.mktemp("healthy"),
        "healthy",
        flags=[*QWEN_FLAGS, "--api-key", KEY],
        env={"SPARKSIM_DECODE_TPS": "50"},
        model_dir=model_dir,
    ).start()
    try:
        cluster.wait_ready()
        yield cluster
    finally:
        cluster.remove()


def test_rendezvous_brings_up_head_and_worker(healthy):
    assert healthy.healthy(0)
    assert healthy.healthy(1), "worker's dummy health server should answer 200"
    assert request(f"{healthy.url(1)}/health_generate")[0] == 200
    # --enable-metrics: the worker's health server carries the metrics route too (a scrape target
    # that is up), the scheduler's series are the head's; any other path is still 404.
    status, body = request(f"{healthy.url(1)}/metrics")
    assert status == 200 and "sglang:num_running_reqs" not in body
    assert request(f"{healthy.url(1)}/v1/models")[0] == 404
    head = healthy.logs(0)
    assert READY_LINE in head
    assert "Rendezvous: rank 1 joined" in head
    assert re.search(r"NCCL INFO NET/IB : rocep1s0f0:1 GID index 7 = ", head)
    worker = healthy.logs(1)
    assert re.search(r"NCCL INFO NET/IB : rocep1s0f0:1 GID index 5 = ", worker)
    assert READY_LINE not in worker


def test_api_key_guards_everything_but_health(healthy):
    url = healthy.url(0)
    assert request(f"{url}/v1/models") == (401, '{"error":"Unauthorized"}')
    assert request(f"{url}/v1/models", headers={"Authorization": "Bearer wrong"})[0] == 401
    assert request(f"{url}/health")[0] == 200
    assert request(f"{url}/health_generate")[0] == 200
    assert request(f"{url}/metrics")[0] == 200
    status, body = request(f"{url}/v1/models", headers={"Authorization": f"Bearer {KEY}"})
    assert status == 200
    card = json.loads(body)["data"][0]
    assert card["id"] == "qwen3.8-27b"
    assert card["owned_by"] == "sglang"
    assert card["max_model_len"] == 40960


def test_answers_are_deterministic(healthy):
    url = healthy.url(0)
    status, body = chat(url, "Reply with exactly this string: PONG-42", 32, KEY)
    assert status == 200, body
    assert json.loads(body)["choices"][0]["message"]["content"] == "PONG-42"
    status, body = chat(url, "What is 17*19? Answer with the number only.", 32, KEY)
    reply = json.loads(body)
    assert reply["choices"][0]["message"]["content"] == "323"
    assert reply["choices"][0]["finish_reason"] == "stop"
    status, body = chat(url, "count from 1 to 20", 10, KEY)
    reply = json.loads(body)
    assert reply["choices"][0]["message"]["content"] == "1 2 3 4 5 6 7 8 9 10"
    assert reply["choices"][0]["finish_reason"] == "length"
    assert reply["usage"]["completion_tokens"] == 10
    status, body = request(
        f"{url}/generate",
        "POST",
        {"text": "count from 1 to 3", "sampling_params": {"max_new_tokens": 16}},
        {"Authorization": f"Bearer {KEY}"},
    )
    assert status == 200
    assert json.loads(body)["text"] == "1 2 3"


def test_stream_and_decode_rate(healthy):
    tic = time.monotonic()
    status, body = chat(healthy.url(0), "tell me a story", 25, KEY, stream=True)
    elapsed = time.monotonic() - tic
    assert status == 200
    events = [line[6:] for line in body.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert len(text.split()) == 25
    assert chunks[-1]["usage"]["completion_tokens"] == 25
    # 25 tokens at SPARKSIM_DECODE_TPS=50 take about half a second, not less.
    assert 0.4 < elapsed < 5


def test_parallel_streams_then_queue(healthy):
    """--max-running-requests 4: four streams decode side by side, more wait their turn."""

    def wave(n):
        tic = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(n) as pool:
            replies = list(pool.map(lambda _: chat(healthy.url(0), "go on", 50, KEY), range(n)))
        assert all(status == 200 for status, _ in replies)
        return time.monotonic() - tic

    # 50 tokens at SPARKSIM_DECODE_TPS=50 take ~1 s per wave of <= 4 requests.
    assert wave(4) < 1.6
    assert wave(8) >= 1.9


def _progress(url):
    """(running requests, generated tokens) from the head's /metrics, as SGLang names them."""
    status, text = request(f"{url}/metrics")
    assert status == 200
    values = {}
    for line in text.splitlines():
        match = re.match(r"^(sglang:[a-z_]+)\{[^}]*\} (\S+)$", line)
        if match:
            values[match.group(1)] = float(match.group(2))
    return values["sglang:num_running_reqs"], values["sglang:generation_tokens_total"]


def test_a_spinning_head_answers_health_but_generates_nothing(healthy):
    """The wedge /health hides: requests stay running, the token counter stands still."""
    head = healthy.node(0)
    url = healthy.url(0)
    docker("exec", head, "touch", "/tmp/sparksim-spin")
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            reply = pool.submit(chat, url, "write a long story", 400, KEY, timeout=60)
            assert wait_for(lambda: _progress(url)[0] >= 1, 10)
            running, tokens = _progress(url)
            time.sleep(2)
            assert request(f"{url}/health")[0] == 200
            assert _progress(url) == (running, tokens)
            assert not reply.done()
            docker("exec", head, "rm", "/tmp/sparksim-spin")
            status, _body = reply.result(timeout=30)
        assert status == 200
        assert _progress(url)[1] >= tokens + 400
    finally:
        docker("exec", head, "rm", "-f", "/tmp/sparksim-spin", check=False)


def _families(url):
    from prometheus_client.parser import text_string_to_metric_families

    status, text = request(f"{url}/metrics")
    assert status == 200
    return {f.name: f for f in text_string_to_metric_families(text)}


def _sample(families, family, sample):
    (value,) = [s.value for s in families[family].samples if s.name == sample]
    return value


def test_metrics_carry_sglangs_names_types_and_latency_histograms(healthy):
    """What a dashboard reads: SGLang's gauges, counters and histograms, parsed by the
    Prometheus client library; one request moves each as the real server's would."""
    url = healthy.url(0)
    before = _families(url)
    kinds = {name: f.type for name, f in before.items()}
    for gauge in ("num_running_reqs", "num_queue_reqs", "token_usage", "gen_throughput"):
        assert kinds[f"sglang:{gauge}"] == "gauge", kinds
    for counter in ("num_requests", "prompt_tokens", "generation_tokens"):
        assert kinds[f"sglang:{counter}"] == "counter", kinds
    for hist in ("time_to_first_token", "inter_token_latency", "e2e_request_latency"):
        assert kinds[f"sglang:{hist}_seconds"] == "histogram", kinds
    status, _body = chat(url, "count to twenty", 20, KEY)
    assert status == 200
    after = _families(url)

    def moved(family, sample):
        return _sample(after, family, sample) - _sample(before, family, sample)

    assert moved("sglang:generation_tokens", "sglang:generation_tokens_total") == 20
    assert moved("sglang:num_requests", "sglang:num_requests_total") == 1
    assert (
        moved("sglang:time_to_first_token_seconds", "sglang:time_to_first_token_seconds_count") == 1
    )
    assert (
        moved("sglang:inter_token_latency_seconds", "sglang:inter_token_latency_seconds_count")
        == 19
    )
    assert (
        moved("sglang:e2e_request_latency_seconds", "sglang:e2e_request_latency_seconds_count") == 1
    )
    # 20 tokens at 50 tok/s: the request took about 0.4 s, inside the histogram's buckets.
    assert (
        0.2
        < moved("sglang:e2e_request_latency_seconds", "sglang:e2e_request_latency_seconds_sum")
        < 5
    )
    assert _sample(after, "sglang:num_running_reqs", "sglang:num_running_reqs") == 0


def test_missing_rank_never_serves(cluster_factory):
    cluster = cluster_factory("missing", flags=["--watchdog-timeout", "2"]).start(ranks=[0])
    assert wait_for(lambda: "Rendezvous: waiting for rank(s) 1" in cluster.logs(0), 15)
    assert not wait_for(lambda: cluster.healthy(0), 3)
    assert cluster.state(0)[0], "rank 0 keeps waiting instead of exiting"
    assert READY_LINE not in cluster.logs(0)


def test_wrong_gid_index_is_refused(cluster_factory):
    cluster = cluster_factory("gid", gid_index={1: 1}).start(ranks=[1])
    assert cluster.wait_exit(1, 15)
    assert cluster.state(1)[1] == 1
    assert re.search(
        r"NCCL WARN NET/IB : rocep1s0f0:1 GID index 1 is fe80::\S+ \(RoCE v2, enp1s0f0np0\), "
        rf"not the RoCE v2 GID of {re.escape(cluster.roce_ip(1))} \(index 5\)",
        cluster.logs(1),
    ), cluster.logs(1)


def test_gid_auto_selected_inside_addr_range(cluster_factory):
    cluster = cluster_factory(
        "gidauto",
        gid_index={0: None, 1: None},
        old_first={0: True},
        gid_layouts={0: "link-local,empty,ipv4:{old},ipv4:{ip}"},
    ).start()
    cluster.wait_ready()
    assert re.search(
        rf"GID index 7 = {re.escape(cluster.roce_ip(0))} \(RoCE v2, {ROCE_IF}\), auto-selected",
        cluster.logs(0),
    )


def test_socket_ifname_on_roce_nic_hangs_bootstrap(cluster_factory):
    """Pitfall 1: rank 0's RoCE NIC lists an old IPv4 first; rank 1 cannot reach it."""
    cluster = cluster_factory(
        "pitfall1",
        socket_ifname=ROCE_IF,
        old_first={0: True},
        gid_layouts={0: "link-local,empty,ipv4:{old},ipv4:{ip}"},
    ).start()
    stall = re.compile(
        rf"NCCL WARN bootstrap: rank 1 cannot reach rank 0 at {re.escape(cluster.old_ip(0))}:\d+ "
        r"\(.*\) for \d+s, still waiting"
    )
    assert wait_for(lambda: stall.search(cluster.logs(1)), 20), cluster.logs(1)
    assert f"Bootstrap: Using {ROCE_IF}:{cluster.old_ip(0)}<0>" in cluster.logs(0)
    assert not cluster.healthy(0)
    assert cluster.state(0)[0] and cluster.state(1)[0], "a bootstrap stall hangs, it does not exit"
    assert READY_LINE not in cluster.logs(0)
    assert f":{DIST_PORT}" in cluster.logs(1)


@pytest.mark.parametrize("lost", [1, 0])
def test_losing_a_rank_takes_the_other_down(cluster_factory, lost):
    cluster = cluster_factory(f"loss{lost}", flags=["--watchdog-timeout", "2"]).start()
    cluster.wait_ready()
    docker("kill", cluster.node(lost))
    other = 1 - lost
    assert cluster.wait_exit(other, 15)
    assert cluster.state(other)[1] != 0
    text = cluster.logs(other)
    assert (
        "NCCL WARN NET/Socket : NCCL error: remote process exited or there was a network error"
        in text
    )
