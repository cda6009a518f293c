# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import json
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.sparkfleet.serving.plugins.module_utils import _health

MODEL = "qwen3.8-27b"
ALL_CHECKS = ["health", "models", "exact", "math", "short_max_tokens", "decode"]


# --------------------------------------------------------------------------
# A stand-in SGLang server, configurable per test
# --------------------------------------------------------------------------


class StreamClock:
    """The client's clock: real time, except that a stream's token gaps are virtual.

    A rate measured from real arrival times depends on when a loaded machine schedules the
    client (a chunk read late makes the next gap look short), so the fake server does not
    sleep between chunks: it waits until the client has read every line it wrote (one clock
    call per line read), then moves this clock on by the gap. While a stream is written the
    clock stands still between those moves, so the stamps are exact.
    """

    def __init__(self):
        self.calls = 0
        self.offset = 0.0
        self.frozen_at = None
        self.changed = threading.Condition()
        self.stream = threading.Lock()  # one stream at a time: the next waits for this thaw
        self.missed = []  # waits the client never answered (its clock is not this one)

    def __call__(self):
        with self.changed:
            self.calls += 1
            self.changed.notify_all()
            if self.frozen_at is not None:
                return self.frozen_at
            return time.monotonic() + self.offset

    def freeze(self):
        self.stream.acquire()
        with self.changed:
            self.frozen_at = time.monotonic() + self.offset
            return self.calls

    def wait_for_calls(self, count, timeout=5.0):
        with self.changed:
            if not self.changed.wait_for(lambda: self.calls >= count, timeout):
                # the engine fixture fails the test: its rates were measured on another clock
                self.missed.append(f"{self.calls} clock calls, waited {timeout} s for {count}")

    def advance(self, seconds):
        with self.changed:
            self.frozen_at += seconds

    def thaw(self):
        with self.changed:
            self.offset = self.frozen_at - time.monotonic()
            self.frozen_at = None
        self.stream.release()


CLOCKS = {}  # engine URL -> the StreamClock its clients use


class Engine:
    """What the fake server answers; tests change attributes before running checks."""

    def __init__(self):
        self.models = [MODEL]
        self.api_key = None
        self.protect_health = False  # SGLang exempts /health from the API key
        self.health_codes = []  # statuses /health answers before it answers 200
        self.exact_answer = None  # None: echo the requested token
        self.math_answer = "323"
        self.short_text = "1 2 3 4 5 6 7 8"
        self.clamp_to = 16  # completion_tokens reported for a short request
        self.chat_delay = 0.0
        self.chat_status = 200
        self.reasoning_only = False
        # decode stream: one spacing per run (cycled), tokens per chunk, chunks
        self.spacings = [0.02]
        self.chunks = 6
        self.tokens_per_chunk = 1
        self.send_usage = True
        self.send_done = True
        self.requests = []
        self.stream_runs = 0
        self.metrics = None  # /metrics text (None: 404, metrics off)

    def answer(self, prompt, max_tokens):
        if "17*19" in prompt:
            return self.math_answer, 4, "stop"
        match = re.search(r"exactly[^:]*:\s*(\S+)", prompt)
        if match:
            text = match.group(1) if self.exact_answer is None else self.exact_answer
            return text, 9, "stop"
        return self.short_text, max(max_tokens, self.clamp_to), "length"


class Handler(BaseHTTPRequestHandler):
    engine = None  # set per server

    def log_message(self, *args):
        pass

    def _send_json(self, status, document):
        body = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _authorized(self):
        engine = self.engine
        if engine.api_key and self.headers.get("Authorization") != "Bearer " + engine.api_key:
            self._send_json(401, {"error": "Unauthorized"})
            return False
        return True

    def _health(self):
        if self.engine.health_codes:
            self._send_json(self.engine.health_codes.pop(0), {})
            return
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        engine = self.engine
        engine.requests.append(("GET", self.path, dict(self.headers), None))
        if self.path == "/health" and not engine.protect_health:
            self._health()
        elif self.path == "/metrics" and engine.metrics is not None:
            body = engine.metrics.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif not self._authorized():
            return
        elif self.path == "/health":
            self._health()
        elif self.path == "/v1/models":
            self._send_json(200, {"object": "list", "data": [{"id": m} for m in engine.models]})
        else:
            self._send_json(404, {"detail": "Not Found"})

    def do_POST(self):
        engine = self.engine
        payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        engine.requests.append(("POST", self.path, dict(self.headers), payload))
        if not self._authorized():
            return
        if engine.chat_delay:
            time.sleep(engine.chat_delay)
        if engine.chat_status != 200:
            self._send_json(engine.chat_status, {"object": "error", "message": "boom"})
            return
        if payload.get("stream"):
            self._stream(payload)
            return
        prompt = payload["messages"][0]["content"]
        text, tokens, finish = engine.answer(prompt, payload["max_tokens"])
        message = {"role": "assistant", "content": text, "reasoning_content": None}
        if engine.reasoning_only:
            message = {"role": "assistant", "content": None, "reasoning_content": text}
        self._send_json(
            200,
            {
                "object": "chat.completion",
                "model": payload["model"],
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": 20, "completion_tokens": tokens, "total_tokens": 0},
            },
        )

    def _event(self, document):
        data = document if isinstance(document, str) else json.dumps(document)
        self.wfile.write(f"data: {data}\n\n".encode())
        self.wfile.flush()

    def _stream(self, payload):
        engine = self.engine
        spacing = engine.spacings[engine.stream_runs % len(engine.spacings)]
        engine.stream_runs += 1
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()

        def chunk(delta, finish=None):
            return {
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                "usage": None,
            }

        clock = engine.clock
        base = clock.freeze()
        written = 0  # lines written: each event is a data line and a blank line

        def send(document, gap=0.0):
            nonlocal written
            if gap:
                clock.wait_for_calls(base + written)  # the client read (and stamped) it all
                clock.advance(gap)
            self._event(document)
            written += 2

        try:
            send(chunk({"role": "assistant", "content": ""}))
            for index in range(engine.chunks):
                gap = spacing if index else 0.05  # the first: time to first token
                last = index == engine.chunks - 1
                send(chunk({"content": f"{index + 1} "}, "length" if last else None), gap)
            if engine.send_usage:
                tokens = engine.chunks * engine.tokens_per_chunk
                send({"choices": [], "usage": {"completion_tokens": tokens}})
            if engine.send_done:
                send("[DONE]")
            # the client stops reading at [DONE] (its blank line unread): wait for the rest, so no
            # token is stamped once the clock runs again
            clock.wait_for_calls(base + written - 1)
        finally:
            clock.thaw()


@pytest.fixture
def engine():
    state = Engine()
    handler = type("BoundHandler", (Handler,), {"engine": state})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    state.clock = CLOCKS[state.url] = StreamClock()
    yield state
    del CLOCKS[state.url]
    assert not state.clock.missed, (
        f"the client did not read the stream on the engine's clock: {state.clock.missed}"
    )
    server.shutdown()
    server.server_close()


@pytest.fixture
def dead_url():
    """A loopback URL where nothing listens (connection refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def run(url, checks, api_key=None, request_timeout=5, **kwargs):
    kwargs.setdefault("served_model_name", MODEL)
    kwargs.setdefault("timeout", 5)
    kwargs.setdefault("poll_interval", 0.05)
    kwargs.setdefault("chat_template_kwargs", {"enable_thinking": False})
    client = _health.SGLangClient(
        url, api_key=api_key, request_timeout=request_timeout, clock=CLOCKS.get(url, time.monotonic)
    )
    return _health.HealthRunner(client, **kwargs).run(checks)


# --------------------------------------------------------------------------
# Pure helpers
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url, expected",
    [
        ("http://127.0.0.1:8081", ("http", "127.0.0.1", 8081, "")),
        ("http://127.0.0.1:8081/", ("http", "127.0.0.1", 8081, "")),
        ("http://localhost", ("http", "localhost", 80, "")),
        ("https://head.example/sglang/", ("https", "head.example", 443, "/sglang")),
        ("http://[::1]:30000", ("http", "::1", 30000, "")),
    ],
)
def test_parse_base_url(url, expected):
    assert _health.parse_base_url(url) == expected


@pytest.mark.parametrize(
    "url", ["127.0.0.1:8081", "ftp://host", "http://", "http://host:99999", "", None]
)
def test_parse_base_url_rejects(url):
    with pytest.raises(ValueError):
        _health.parse_base_url(url)


@pytest.mark.parametrize(
    "checks, expected",
    [
        (None, ["health", "models"]),
        (["decode", "health"], ["decode", "health"]),
        (["health", "models", "health"], ["health", "models"]),
        ([], []),
    ],
)
def test_normalize_checks(checks, expected):
    assert _health.normalize_checks(checks) == expected


def test_normalize_checks_rejects_unknown():
    with pytest.raises(ValueError, match=r"unknown check.*bogus"):
        _health.normalize_checks(["health", "bogus"])


def _params(**overrides):
    params = {
        "url": "http://127.0.0.1:8081",
        "checks": ["health", "models"],
        "served_model_name": None,
        "timeout": 900,
        "request_timeout": 120,
        "poll_interval": 5,
        "decode_runs": 3,
        "decode_max_tokens": 256,
        "short_max_tokens": 8,
    }
    params.update(overrides)
    return params


@pytest.mark.parametrize(
    "overrides, problem",
    [
        ({}, None),
        ({"checks": ["exact"], "served_model_name": MODEL}, None),
        ({"checks": ["health", "exact", "decode"]}, "served_model_name is required"),
        ({"url": "localhost:8081"}, "url must start with http"),
        ({"decode_runs": 0}, "decode_runs must be at least 1"),
        ({"decode_max_tokens": 1}, "decode_max_tokens must be at least 2"),
        ({"request_timeout": 0}, "request_timeout must be at least 1"),
        ({"timeout": -1}, "timeout must be at least 0"),
    ],
)
def test_validate_params(overrides, problem):
    errors = _health.validate_params(_params(**overrides))
    if problem is None:
        assert errors == []
    else:
        assert any(problem in error for error in errors), errors


def test_exact_token_and_prompt_match_the_stand_in_shape():
    token = _health.make_exact_token()
    assert re.fullmatch(r"SPARKFLEET-[0-9A-F]{8}", token)
    assert token != _health.make_exact_token()
    prompt = _health.exact_prompt(token)
    assert prompt == "Reply with exactly this string and nothing else: " + token
    assert re.search(r"exactly[^:]*:\s*(\S+)", prompt).group(1) == token


@pytest.mark.parametrize(
    "content, token, expected",
    [
        ("SPARKFLEET-AB12", "SPARKFLEET-AB12", True),
        ("  SPARKFLEET-AB12\n", "SPARKFLEET-AB12", True),
        ("SPARKFLEET-AB12.", "SPARKFLEET-AB12", False),
        ("Sure: SPARKFLEET-AB12", "SPARKFLEET-AB12", False),
        ("hello", "SPARKFLEET-AB12", False),
        ("", "SPARKFLEET-AB12", False),
        (None, "SPARKFLEET-AB12", False),
    ],
)
def test_exact_matches(content, token, expected):
    assert _health.exact_matches(content, token) is expected


@pytest.mark.parametrize(
    "content, expected",
    [
        ("323", True),
        (" 323\n", True),
        ("17*19 = 323.", True),
        ("The answer is **323**", True),
        ("324", False),
        ("3230", False),
        ("1323", False),
        ("323.5", False),
        ("", False),
        (None, False),
    ],
)
def test_math_matches(content, expected):
    assert _health.math_matches(content) is expected


def test_chat_payload():
    assert _health.chat_payload(MODEL, "hi", 8, {"enable_thinking": False}) == {
        "model": MODEL,
        "messages": [{"role": "user", "content": "hi"}],
        "temperature": 0,
        "max_tokens": 8,
        "chat_template_kwargs": {"enable_thinking": False},
    }
    streamed = _health.chat_payload(MODEL, "hi", 256, {}, stream=True)
    assert "chat_template_kwargs" not in streamed
    assert streamed["stream"] is True
    assert streamed["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize(
    "document, expected",
    [
        (
            {
                "choices": [{"message": {"content": "323"}, "finish_reason": "stop"}],
                "usage": {"completion_tokens": 2},
            },
            ("323", "", "stop", 2),
        ),
        (
            {"choices": [{"message": {"content": None, "reasoning_content": "hm"}}]},
            ("", "hm", None, None),
        ),
    ],
)
def test_chat_answer(document, expected):
    assert _health.chat_answer(document) == expected


@pytest.mark.parametrize("document", [[], {}, {"choices": []}, {"choices": ["x"]}])
def test_chat_answer_rejects(document):
    with pytest.raises(ValueError):
        _health.chat_answer(document)


def test_model_ids():
    assert _health.model_ids({"data": [{"id": "a"}, {"id": "b"}, {"x": 1}]}) == ["a", "b"]
    with pytest.raises(ValueError):
        _health.model_ids({"models": []})


def test_excerpt_masks_secret_and_truncates():
    assert _health.excerpt(b"key=abc123 ok", secret="abc123") == "key=******** ok"
    long = _health.excerpt("x" * 500)
    assert len(long) == 200
    assert long.endswith("...")
    assert _health.excerpt(None) == ""


def _chunk(text=None, finish=None, usage=None, reasoning=None):
    delta = {}
    if text is not None:
        delta["content"] = text
    if reasoning is not None:
        delta["reasoning_content"] = reasoning
    document = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage is not None:
        document = {"choices": [], "usage": {"completion_tokens": usage}}
    return document


def test_decode_rate_uses_usage_and_excludes_time_to_first_token():
    events = [(10.0, _chunk(""))]  # role chunk: no text
    events += [(11.0 + 0.1 * i, _chunk(f"{i} ")) for i in range(5)]  # 11.0 .. 11.4
    events[-1][1]["choices"][0]["finish_reason"] = "length"
    events.append((11.5, _chunk(usage=9)))
    run = _health.decode_rate(events, started=10.0)
    # (9 - 1) tokens over 0.4 s between first and last text chunk
    assert run["tokens_per_s"] == pytest.approx(20.0)
    assert run["completion_tokens"] == 9
    assert run["chunks"] == 5
    assert run["usage_reported"] is True
    assert run["finish_reason"] == "length"
    assert run["ttft_s"] == pytest.approx(1.0)
    assert run["decode_s"] == pytest.approx(0.4)


def test_decode_rate_counts_chunks_without_usage():
    events = [(1.0 + 0.25 * i, _chunk(reasoning="x")) for i in range(5)]
    run = _health.decode_rate(events, started=0.5)
    assert run["usage_reported"] is False
    assert run["completion_tokens"] == 5
    assert run["tokens_per_s"] == pytest.approx(4.0)


@pytest.mark.parametrize(
    "events",
    [
        [],
        [(1.0, _chunk("only"))],
        [(1.0, _chunk("a")), (1.0, _chunk("b"))],
        [(1.0, _chunk("a")), (2.0, _chunk("b")), (3.0, _chunk(usage=1))],
    ],
)
def test_decode_rate_not_measurable(events):
    assert _health.decode_rate(events, started=0.0)["tokens_per_s"] is None


@pytest.mark.parametrize(
    "rates, expected",
    [
        ([30.0, 10.0, 20.0], 20.0),
        ([10.0, 20.0], 15.0),
        ([None, 7.0], 7.0),
        ([None], None),
        ([], None),
    ],
)
def test_median_rate(rates, expected):
    assert _health.median_rate([{"tokens_per_s": r} for r in rates]) == expected


@pytest.mark.parametrize(
    "exc, expected",
    [
        (ConnectionRefusedError(111, "x"), "connection refused"),
        (socket.timeout("timed out"), "timed out after 3s"),
        (ConnectionResetError(104, "x"), "connection reset by the server"),
        (_health.http.client.RemoteDisconnected("x"), "without answering"),
        (OSError(113, "No route to host"), "OSError"),
    ],
)
def test_describe_transport_error(exc, expected):
    assert expected in _health.describe_transport_error(exc, 3)


def test_failure_message():
    results = {
        "exact": {"detail": "expected 'SPARKFLEET-1', got 'hello' (HTTP 200)"},
        "math": {"detail": "expected 323, got '324' (HTTP 200)"},
    }
    message = _health.failure_message("http://h:1", results, ["exact", "math"], ["decode"])
    assert message == (
        "SGLang at http://h:1 failed exact, math: exact: expected 'SPARKFLEET-1', got 'hello' "
        "(HTTP 200); math: expected 323, got '324' (HTTP 200) (not run: decode)"
    )
    assert _health.failure_message("http://h:1", results, []) == ""


# --------------------------------------------------------------------------
# Checks against the stand-in server
# --------------------------------------------------------------------------


def test_healthy_server_passes_every_check(engine):
    engine.spacings = [0.01, 0.04, 0.02]  # three runs: fast, slow, middle
    engine.chunks = 5
    report = run(engine.url, ALL_CHECKS, decode_runs=3, decode_max_tokens=64)

    assert report["passed"] is True, report["msg"]
    assert report["msg"] == ""
    assert list(report["checks"]) == ALL_CHECKS
    for name, evidence in report["checks"].items():
        assert evidence["passed"] is True, name
        assert evidence["status"] == 200, name
        assert evidence["elapsed_s"] >= 0
    checks = report["checks"]
    assert checks["health"]["attempts"] == 1
    assert checks["models"]["model_ids"] == [MODEL]
    assert checks["exact"]["excerpt"] == checks["exact"]["expected"]
    assert checks["math"]["excerpt"] == "323"
    short = checks["short_max_tokens"]
    assert short["max_tokens"] == 8
    assert short["completion_tokens"] == 16
    assert short["clamp_observed"] is True
    assert short["finish_reason"] == "length"

    decode = checks["decode"]
    rates = [r["tokens_per_s"] for r in decode["runs"]]
    assert len(rates) == 3
    assert all(r["usage_reported"] and r["complete"] for r in decode["runs"])
    # 4 token gaps per run: 0.01 s -> 100 tok/s, 0.04 s -> 25, 0.02 s -> 50; the median reported
    assert rates == pytest.approx([100.0, 25.0, 50.0], rel=1e-3)
    assert report["decode_tokens_per_s"] == decode["tokens_per_s"] == rates[2]
    assert report["decode_tokens_per_s"] == pytest.approx(50.0, rel=1e-3)  # 4 gaps of 0.02 s
    assert all(r["ttft_s"] >= 0.05 for r in decode["runs"])


def test_every_request_names_the_model_and_the_template_kwargs(engine):
    engine.api_key = "s3cret"
    report = run(engine.url, ALL_CHECKS, api_key="s3cret", decode_runs=1)
    assert report["passed"] is True, report["msg"]
    posts = [r for r in engine.requests if r[0] == "POST"]
    assert len(posts) == 4
    for _method, path, headers, payload in posts:
        assert path == "/v1/chat/completions"
        assert headers["Authorization"] == "Bearer s3cret"
        assert payload["model"] == MODEL
        assert payload["temperature"] == 0
        assert payload["chat_template_kwargs"] == {"enable_thinking": False}
    prompts = [p[3]["messages"][0]["content"] for p in posts]
    assert prompts[1:] == [
        "What is 17*19? Answer with the number only.",
        "Count from 1 to 10, separated by spaces.",
        "Count from 1 to 400, separated by spaces.",
    ]
    assert prompts[0].startswith("Reply with exactly this string and nothing else: SPARKFLEET-")
    assert [p[3]["max_tokens"] for p in posts] == [128, 128, 8, 256]
    assert posts[3][3]["stream_options"] == {"include_usage": True}
    assert "s3cret" not in json.dumps(report)


def test_health_retries_through_503(engine):
    engine.health_codes = [503, 503, 500]
    report = run(engine.url, ["health", "models"])
    health = report["checks"]["health"]
    assert report["passed"] is True, report["msg"]
    assert health["attempts"] == 4
    assert health["status"] == 200


def test_health_gives_up_after_timeout_on_refused_connection(dead_url):
    started = time.monotonic()
    report = run(dead_url, ["health", "models", "exact"], timeout=1, poll_interval=0.2)
    took = time.monotonic() - started
    health = report["checks"]["health"]

    assert report["passed"] is False
    assert health["passed"] is False
    assert health["status"] is None
    assert health["attempts"] >= 3
    # upper bounds with room for a loaded machine: giving up at all is what is checked
    assert 1.0 <= health["waited_s"] < 5
    assert took < 8
    assert health["error"] == "connection refused"
    assert report["msg"].startswith(f"SGLang at {dead_url} failed health: health: no HTTP 200")
    assert f"after {health['waited_s']}s" in report["msg"]
    assert "connection refused" in report["msg"]
    assert "(not run: models, exact)" in report["msg"]
    assert report["checks"]["models"]["skipped"] is True
    assert report["failed"] == ["health"]


def test_health_times_out_on_503_forever(engine):
    engine.health_codes = [503] * 1000
    report = run(engine.url, ["health"], timeout=1, poll_interval=0.1)
    assert report["passed"] is False
    assert report["checks"]["health"]["status"] == 503
    assert "last: HTTP 503" in report["msg"]


def test_health_stops_waiting_when_the_engine_exited(engine):
    engine.health_codes = [503] * 1000
    calls = []

    def alive():
        calls.append(1)
        return (len(calls) < 3), "exited 137"

    started = time.monotonic()
    report = run(engine.url, ["health", "models"], timeout=30, poll_interval=0.05, alive=alive)
    assert time.monotonic() - started < 15  # long before the 30 s timeout
    assert len(calls) == 3
    health = report["checks"]["health"]
    assert health["attempts"] == 3 and health["status"] == 503
    assert health["error"] == "the engine exited before it answered (exited 137)"
    assert report["msg"].startswith(
        f"SGLang at {engine.url} failed health: health: the engine exited before it answered"
    )
    assert report["checks"]["models"]["skipped"] is True


def test_health_is_not_asked_whether_the_engine_lives_once_healthy(engine):
    def alive():
        raise AssertionError("alive() called although /health answered 200")

    report = run(engine.url, ["health"], alive=alive)
    assert report["passed"] is True, report["msg"]


def test_health_poll_uses_its_own_socket_timeout():
    # A server that accepts and never answers: each poll gives up after
    # poll_request_timeout (1 s), not after the client's request_timeout (60 s).
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        started = time.monotonic()
        report = run(
            url,
            ["health"],
            request_timeout=60,
            timeout=2,
            poll_interval=0.05,
            poll_request_timeout=1,
        )
        took = time.monotonic() - started
    assert report["passed"] is False
    assert report["checks"]["health"]["error"] == "timed out after 1s"
    assert 2 <= took < 15  # well short of request_timeout's 60 s


def test_run_check_returns_the_evidence_and_whether_it_is_fatal(engine, dead_url):
    client = _health.SGLangClient(engine.url, request_timeout=5)
    runner = _health.HealthRunner(client, served_model_name=MODEL)
    evidence, fatal = runner.run_check("models")
    assert evidence["passed"] and evidence["status"] == 200 and evidence["detail"] == "ok"
    assert evidence["model_ids"] == [MODEL] and not fatal
    engine.models = ["other"]
    evidence, fatal = runner.run_check("models")
    assert not evidence["passed"] and not fatal
    assert "expected" in evidence["detail"] and evidence["elapsed_s"] >= 0
    dead = _health.HealthRunner(_health.SGLangClient(dead_url, request_timeout=5), MODEL)
    evidence, fatal = dead.run_check("math")
    assert not evidence["passed"] and fatal and evidence["status"] is None
    assert "connection refused" in evidence["detail"]


def test_wrong_model_name(engine):
    engine.models = ["some-other-model"]
    report = run(engine.url, ["health", "models"])
    assert report["passed"] is False
    assert report["checks"]["health"]["passed"] is True
    assert report["checks"]["models"]["model_ids"] == ["some-other-model"]
    assert (
        f"models: expected '{MODEL}' among the served models, found ['some-other-model'] "
        "(HTTP 200)" in report["msg"]
    )
    assert engine.url in report["msg"]


def test_models_without_a_name_accepts_any_served_model(engine):
    report = run(engine.url, ["models"], served_model_name=None)
    assert report["passed"] is True
    engine.models = []
    report = run(engine.url, ["models"], served_model_name=None)
    assert report["passed"] is False
    assert "no model served" in report["msg"]


def test_wrong_exact_answer(engine):
    engine.exact_answer = "hello"
    report = run(engine.url, ["exact", "math"], exact_token="SPARKFLEET-0001")
    assert report["passed"] is False
    assert report["failed"] == ["exact"]
    assert report["checks"]["math"]["passed"] is True  # a wrong answer does not stop the run
    assert "exact: expected 'SPARKFLEET-0001', got 'hello' (HTTP 200)" in report["msg"]


def test_thinking_only_answer_points_at_chat_template_kwargs(engine):
    engine.reasoning_only = True
    report = run(engine.url, ["exact"], exact_token="SPARKFLEET-0002")
    assert report["passed"] is False
    assert "got ''" in report["msg"]
    assert "reasoning_content" in report["msg"]


@pytest.mark.parametrize("answer", ["324", "3230", "I think it is 17*19."])
def test_wrong_math_answer(engine, answer):
    engine.math_answer = answer
    report = run(engine.url, ["math"])
    assert report["passed"] is False
    assert report["checks"]["math"]["excerpt"] == answer
    assert f"math: expected 323, got {answer!r} (HTTP 200)" in report["msg"]


def test_short_max_tokens_without_text_fails(engine):
    engine.short_text = ""
    report = run(engine.url, ["short_max_tokens"])
    assert report["passed"] is False
    assert "max_tokens=8 answered HTTP 200 with no text" in report["msg"]


def test_short_max_tokens_server_error(engine):
    engine.chat_status = 500
    report = run(engine.url, ["short_max_tokens"])
    assert report["passed"] is False
    assert report["checks"]["short_max_tokens"]["status"] == 500
    assert "HTTP 500 from /v1/chat/completions" in report["msg"]
    assert "boom" in report["checks"]["short_max_tokens"]["excerpt"]


def test_request_timeout(engine):
    engine.chat_delay = 2.5
    started = time.monotonic()
    report = run(engine.url, ["health", "exact", "math"], request_timeout=1)
    assert time.monotonic() - started < 2.4  # math was skipped, not waited for
    exact = report["checks"]["exact"]
    assert report["passed"] is False
    assert exact["status"] is None
    assert "exact: POST /v1/chat/completions failed: timed out after 1s" in report["msg"]
    assert report["checks"]["math"]["skipped"] is True
    assert "(not run: math)" in report["msg"]


@pytest.mark.parametrize("api_key", [None, "wrong-key"])
def test_missing_or_wrong_api_key(engine, api_key):
    engine.api_key = "right-key"
    report = run(engine.url, ["health", "models", "exact"], api_key=api_key)
    assert report["passed"] is False
    assert report["checks"]["health"]["passed"] is True  # /health needs no key
    assert report["checks"]["models"]["status"] == 401
    assert report["checks"]["exact"]["skipped"] is True
    assert "the API key is missing or wrong" in report["msg"]
    assert "sglang_api_key" in report["msg"]
    dumped = json.dumps(report)
    assert "right-key" not in dumped
    assert "wrong-key" not in dumped


def test_api_key_rejected_on_health_stops_retrying(engine):
    engine.api_key = "right-key"
    engine.protect_health = True
    report = run(engine.url, ["health", "models"], api_key="nope", timeout=30)
    health = report["checks"]["health"]
    assert health["attempts"] == 1
    assert health["status"] == 401
    assert "health: HTTP 401 from /health: the API key is missing or wrong" in report["msg"]
    assert "sglang_api_key" in report["msg"]
    assert "nope" not in json.dumps(report)


def test_right_api_key_is_sent_as_bearer(engine):
    engine.api_key = "right-key"
    report = run(engine.url, ["models"], api_key="right-key")
    assert report["passed"] is True
    assert engine.requests[-1][2]["Authorization"] == "Bearer right-key"


def test_streaming_without_usage_counts_chunks(engine):
    engine.send_usage = False
    engine.tokens_per_chunk = 2  # usage would say 12 tokens; chunks say 6
    engine.chunks = 6
    engine.spacings = [0.05]
    report = run(engine.url, ["decode"], decode_runs=1)
    assert report["passed"] is True, report["msg"]
    run_ = report["checks"]["decode"]["runs"][0]
    assert run_["usage_reported"] is False
    assert run_["completion_tokens"] == 6
    # 5 chunk gaps of 0.05 s: 20 chunks/s (usage-based would be ~44)
    assert report["decode_tokens_per_s"] == pytest.approx(20.0, rel=1e-3)


def test_decode_rate_does_not_depend_on_when_the_client_reads(engine):
    # A loaded machine: the client gets the CPU 30 ms after each line arrives. Measured on
    # arrival times the 0.02 s gaps would stretch or shrink; on the engine's clock they do not.
    clock = engine.clock

    def late_clock():
        time.sleep(0.03)
        return clock()

    CLOCKS[engine.url] = late_clock
    engine.chunks = 5
    report = run(engine.url, ["decode"], decode_runs=1)
    assert report["passed"] is True, report["msg"]
    assert report["decode_tokens_per_s"] == pytest.approx(50.0, rel=1e-3)


def test_streaming_with_usage_counts_tokens(engine):
    engine.tokens_per_chunk = 2
    engine.chunks = 6
    engine.spacings = [0.05]
    report = run(engine.url, ["decode"], decode_runs=1)
    assert report["passed"] is True, report["msg"]
    assert report["checks"]["decode"]["runs"][0]["completion_tokens"] == 12
    assert report["decode_tokens_per_s"] == pytest.approx(44.0, rel=1e-3)  # 11 tokens over 0.25 s


def test_stream_cut_before_done_fails_decode(engine):
    engine.send_done = False
    report = run(engine.url, ["decode"], decode_runs=2)
    assert report["passed"] is False
    assert "run 1: stream ended before [DONE]" in report["msg"]
    assert report["decode_tokens_per_s"] is not None  # the rate is still evidence


# What SGLang's /metrics looks like (prometheus_client exposition): HELP and TYPE lines, a
# series per label set, the _created samples of counters, labels holding spaces and braces.
SGLANG_METRICS = """\
# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{engine_type="unified",model_name="qwen 3.8 {tp4}",tp_rank="0"} 3.0
sglang:num_running_reqs{engine_type="unified",model_name="qwen 3.8 {tp4}",tp_rank="1"} 1.0
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="m"} 7.0
# HELP sglang:generation_tokens_total Number of generation tokens processed.
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{model_name="m",tp_rank="0"} 1.5e+04
sglang:generation_tokens_total{model_name="m",tp_rank="1"} NaN
sglang:generation_tokens_created{model_name="m",tp_rank="0"} 1.7964e+09
"""


def test_metric_sums_adds_every_series_of_the_named_metrics():
    got = _health.metric_sums(
        SGLANG_METRICS, (_health.RUNNING_REQS_METRIC, _health.GENERATION_TOKENS_METRIC, "x")
    )
    assert got == {"sglang:num_running_reqs": 4.0, "sglang:generation_tokens_total": 15000.0}


def test_progress_reads_the_servers_metrics(engine):
    engine.metrics = SGLANG_METRICS
    client = _health.SGLangClient(engine.url, request_timeout=5)
    assert _health.progress(client) == {"running": 4.0, "tokens": 15000.0}
    # /metrics is read without the API key, as SGLang serves it.
    assert "Authorization" not in engine.requests[-1][2]


@pytest.mark.parametrize(
    "metrics",
    [None, "# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs 1\n", "garbage"],
    ids=["metrics off (404)", "no token counter", "not the text format"],
)
def test_progress_is_none_when_it_cannot_be_read(engine, metrics):
    engine.metrics = metrics
    assert _health.progress(_health.SGLangClient(engine.url, request_timeout=5)) is None


def test_progress_of_a_server_that_does_not_answer_is_none(dead_url):
    assert _health.progress(_health.SGLangClient(dead_url, request_timeout=1)) is None
