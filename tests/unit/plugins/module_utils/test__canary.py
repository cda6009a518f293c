# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.sparkfleet.serving.plugins.module_utils import _canary, _health

MODEL = "flash-0731"


# --------------------------------------------------------------------------
# A candidate engine: answers, then dies after `die_after` completions
# --------------------------------------------------------------------------


class Candidate:
    def __init__(self, die_after=None, wrong=False, tps=400.0, cut_streams=False):
        self.die_after = die_after
        self.cut_streams = cut_streams
        self.wrong = wrong
        self.tps = tps
        self.completions = 0
        self.lock = threading.Lock()

    def answer(self, prompt, max_tokens):
        match = re.search(r"exactly[^:]*:\s*(\S+)", prompt)
        if match:
            words = [match.group(1)]
        elif "17*19" in prompt:
            words = ["323"]
        else:
            words = [str(i) for i in range(1, 401)]
        words = words[:max_tokens]
        if self.wrong:
            words = [w[:-1] + "X" for w in words]
        return words


class Handler(BaseHTTPRequestHandler):
    engine = None

    def log_message(self, *args):
        pass

    def _json(self, status, doc):
        body = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/health":
            self._json(200, {})
        else:
            self._json(200, {"data": [{"id": MODEL}]})

    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        engine = self.engine
        with engine.lock:
            dead = engine.die_after is not None and engine.completions >= engine.die_after
            if not dead:
                engine.completions += 1
        if dead and not (engine.cut_streams and req.get("stream")):
            self.close_connection = True
            self.connection.close()
            return
        prompt = req["messages"][0]["content"]
        words = engine.answer(prompt, req["max_tokens"])
        usage = {"completion_tokens": len(words)}
        if not req.get("stream"):
            msg = {"role": "assistant", "content": " ".join(words)}
            self._json(
                200, {"choices": [{"message": msg, "finish_reason": "stop"}], "usage": usage}
            )
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        if dead:  # headers sent, then the server dies mid-stream
            self.wfile.flush()
            self.close_connection = True
            return
        for word in words:
            time.sleep(1 / engine.tps)
            chunk = {"choices": [{"delta": {"content": word + " "}}]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
        self.wfile.write(f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")


@pytest.fixture
def serve():
    servers = []

    def start(engine):
        handler = type("H", (Handler,), {"engine": engine})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def probe(url, alive=None, decode_runs=3, stability=4, boot_timeout=5):
    client = _health.SGLangClient(url, request_timeout=5)
    runner = _health.HealthRunner(client, served_model_name=MODEL, decode_max_tokens=32)
    return _canary.CandidateProbe(
        runner,
        boot_timeout=boot_timeout,
        poll_interval=0.05,
        decode_runs=decode_runs,
        stability_requests=stability,
        alive=alive,
    ).run()


# --------------------------------------------------------------------------
# The probe
# --------------------------------------------------------------------------


def test_stable_candidate_passes_every_phase(serve):
    result = probe(serve(Candidate()))
    assert result["boot"]["ok"]
    assert result["exact"]["passed"] and result["math"]["passed"] and result["short"]["passed"]
    assert [r["passed"] for r in result["decode_runs"]] == [True] * 3
    assert all(r["tokens_per_s"] > 0 for r in result["decode_runs"])
    assert [s["passed"] for s in result["stability"]] == [True] * 4
    assert result["completions"] == 3 + 3 + 4
    assert result["died"] is None


@pytest.mark.parametrize(
    ("die_after", "phase", "where"),
    [
        (0, "exact", "exact string"),
        (3, "decode", "decode run 1"),
        (4, "decode", "decode run 2"),
        (7, "stability", "stability request 2"),
    ],
)
def test_death_is_a_result_with_the_completions_before_it(serve, die_after, phase, where):
    result = probe(serve(Candidate(die_after=die_after)))
    assert result["completions"] == die_after
    assert result["died"]["after_completions"] == die_after
    assert result["died"]["phase"] == phase
    assert result["died"]["request"] == where
    assert "server closed the connection" in result["died"]["reason"]


def test_a_stream_cut_after_its_headers_is_a_death_not_a_completion(serve):
    result = probe(serve(Candidate(die_after=4, cut_streams=True)))
    assert result["completions"] == 4
    assert result["died"]["request"] == "decode run 2"
    assert "stream ended before [DONE]" in result["died"]["reason"]


def test_wrong_answers_fail_the_gates_but_the_probe_goes_on(serve):
    result = probe(serve(Candidate(wrong=True)))
    assert not result["exact"]["passed"] and not result["math"]["passed"]
    assert result["died"] is None
    assert result["completions"] == 10


def test_boot_fails_fast_when_the_engine_exits(dead_port=1):
    calls = []

    def alive():
        calls.append(1)
        return False, "exited"

    result = probe(f"http://127.0.0.1:{dead_port}", alive=alive, boot_timeout=30)
    assert not result["boot"]["ok"]
    assert "exited before it answered (exited)" in result["boot"]["detail"]
    assert len(calls) == 1
    assert result["exact"] is None and result["completions"] == 0


def test_boot_times_out():
    result = probe("http://127.0.0.1:1", boot_timeout=0.2)
    assert not result["boot"]["ok"]
    # The health check of _health with the boot's clocks: it names the wait and the last error.
    assert result["boot"]["detail"].startswith("no HTTP 200 from /health after 0.")
    assert "last: connection refused" in result["boot"]["detail"]
    assert 0.2 <= result["boot"]["seconds"] < 10


# --------------------------------------------------------------------------
# Evidence, rows, decision, table
# --------------------------------------------------------------------------

HEAD_LOG = [
    "2026-08-01T01:00:00Z [TP0] Decode batch, #running-req: 1, cuda graph: True",
    "2026-08-01T01:05:00Z [TP0] Scheduler watchdog timeout: Python stacks of all 9 threads:",
    '  File "scheduler.py", line 12, in cuda_graph_replay',
    "2026-08-01T01:05:00Z [TP0] Scheduler watchdog timeout (self.watchdog_timeout=300.0, "
    "self.soft=False)",
    "2026-08-01T01:05:05Z SIGQUIT received. signum=None, frame=None. It usually means one "
    "child failed.",
]
PEER_LOG = [
    "x NCCL WARN NET/Socket : NCCL error: remote process exited or there was a network error"
]


def test_evidence_reads_watchdog_stack_sigquit_and_peer():
    ev = _canary.evidence(
        HEAD_LOG, PEER_LOG, "exited 137", {"spark-1": ["LISTEN 0 5 127.0.0.1:8890 0.0.0.0:*"]}
    )
    assert ev["watchdog_line"].endswith("self.soft=False)")
    assert ev["sigquit_line"].startswith("2026-08-01T01:05:05Z SIGQUIT")
    assert "remote process exited" in ev["peer_line"]
    assert ev["stack"][1].strip().endswith("in cuda_graph_replay")
    assert (ev["status"], ev["exit_code"]) == ("exited", 137)
    assert ev["listen"] == {"spark-1": ["127.0.0.1:8890"]}
    assert ev["cause"].startswith("scheduler watchdog timeout")


def test_evidence_without_a_watchdog_line():
    ev = _canary.evidence(["Scheduler start-up failed: is_sm120() returns False"], [], "exited 1")
    assert ev["watchdog_line"] == "" and ev["stack"] == []
    assert ev["cause"] == "Scheduler start-up failed: is_sm120() returns False"


def _result(died=None, exact=True, rates=(7.0, 7.2, 6.9), stability=5):
    ok = {"passed": True, "status": 200, "detail": "ok", "excerpt": ""}
    bad = {"passed": False, "status": 200, "detail": "expected", "excerpt": ""}
    return {
        "boot": {"ok": True, "seconds": 12.5, "detail": "ok"},
        "exact": ok if exact else bad,
        "math": ok,
        "short": ok,
        "decode_runs": [{"passed": True, "tokens_per_s": r} for r in rates],
        "stability": [ok] * stability,
        "completions": 3 + len(rates) + stability,
        "died": died,
    }


def test_rows():
    stable = _canary.candidate_row("a", "", _result())
    assert stable["stable"] and stable["boot"] == "OK (12.5 s)" and stable["exact_math"] == "OK"
    assert stable["c1_decode"] == "7.0 tok/s (median of 3 runs)"
    died = {"phase": "decode", "request": "decode run 2", "after_completions": 4, "reason": "x"}
    row = _canary.candidate_row(
        "c",
        "",
        _result(died=died, exact=False, rates=(0.75,), stability=0),
        _canary.evidence(HEAD_LOG),
    )
    assert not row["stable"] and row["exact_math"] == "FAIL (exact)"
    assert row["c1_decode"] == "0.8 tok/s (1 run)"
    assert row["stability"].startswith("DIED after 4 completions (in decode run 2): scheduler")
    refused = _canary.candidate_row("d", "", None, refused="bad")
    assert refused["boot"] == "REFUSED: bad" and not refused["boot_ok"]
    booted_not = _canary.candidate_row(
        "e", "", {"boot": {"ok": False, "seconds": 3, "detail": "exited"}}
    )
    assert booted_not["boot"] == "FAIL: exited"


def test_decision_keeps_production_unless_a_stable_candidate_is_faster():
    prod = {"profile": "production: anemll", "c1_tokens_per_s": 70.0}
    slow = _canary.candidate_row("a", "", _result())
    winner, line = _canary.decision([slow], prod)
    assert winner is None
    assert line == (
        "Decision: keep production: best stable candidate a at 7.0 tok/s, 0.10x; "
        "production anemll at 70.0 tok/s single-stream."
    )
    fast = _canary.candidate_row("f", "", _result(rates=(90.0,)))
    assert _canary.decision([slow, fast], prod)[0] == "f"
    died = {"phase": "stability", "request": "s", "after_completions": 7, "reason": "x"}
    fast_dies = _canary.candidate_row("g", "", _result(died=died, rates=(95.0,)))
    winner, line = _canary.decision([fast_dies], prod)
    assert winner is None and "no candidate was stable" in line


def test_markdown_table():
    prod = _canary.production_row(
        {"name": "anemll"},
        {
            "checks": {
                "health": {"passed": True},
                "exact": {"passed": True},
                "math": {"passed": True},
                "decode": {"runs": [{"tokens_per_s": 70}, {"tokens_per_s": 71}]},
            },
            "decode_tokens_per_s": 70.5,
        },
    )
    died = {"phase": "decode", "request": "decode run 2", "after_completions": 4, "reason": "x"}
    rows = [
        _canary.candidate_row("a", "", _result()),
        _canary.candidate_row("b", "", _result(died=died), _canary.evidence(HEAD_LOG)),
    ]
    text = _canary.markdown(rows, prod, "Decision: keep production.")
    lines = text.splitlines()
    assert "| Profile | Boot | Exact / math | c1 decode | Stability |" in lines
    assert "| a | OK (12.5 s) | OK | 7.0 tok/s (median of 3 runs) | OK (5/5 sequential) |" in lines
    prod_line = "| production: anemll | OK (running) | OK | 70.5 tok/s (median of 2 runs) |"
    assert prod_line + " production lane |" in lines
    assert "Decision: keep production." in lines
    assert "### b" in lines and any("cuda_graph_replay" in line for line in lines)
