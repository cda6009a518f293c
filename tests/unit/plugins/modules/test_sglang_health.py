# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.sparkfleet.serving.plugins.modules import sglang_health

MODEL = "qwen3.8-27b"
API_KEY = "k-9f3a-very-secret"


class Handler(BaseHTTPRequestHandler):
    """A small SGLang stand-in: key-protected API, echoes the exact token, knows 17*19."""

    seen = None
    math_answer = "323"

    def log_message(self, *args):
        pass

    def _reply(self, status, document=None):
        body = b"" if document is None else json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _authorized(self):
        if self.headers.get("Authorization") == "Bearer " + API_KEY:
            return True
        self._reply(401, {"error": "Unauthorized"})
        return False

    def do_GET(self):
        if self.path == "/health":
            self._reply(200)
        elif self._authorized():
            self._reply(200, {"data": [{"id": MODEL}]})

    def do_POST(self):
        payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append(payload)
        if not self._authorized():
            return
        prompt = payload["messages"][0]["content"]
        if payload.get("stream"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for index in range(4):
                delta = {"content": f"{index + 1} "}
                self.wfile.write(b"data: " + json.dumps({"choices": [{"delta": delta}]}).encode())
                self.wfile.write(b"\n\n")
                self.wfile.flush()
                threading.Event().wait(0.02)
            usage = {"choices": [], "usage": {"completion_tokens": 4}}
            self.wfile.write(b"data: " + json.dumps(usage).encode() + b"\n\ndata: [DONE]\n\n")
            return
        match = re.search(r"exactly[^:]*:\s*(\S+)", prompt)
        text = match.group(1) if match else self.math_answer if "17*19" in prompt else "1 2 3"
        self._reply(
            200,
            {
                "choices": [{"message": {"content": text}, "finish_reason": "stop"}],
                "usage": {"completion_tokens": 16},
            },
        )


@pytest.fixture
def server():
    handler = type("BoundHandler", (Handler,), {"seen": []})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
    httpd.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.handler = handler
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def run_module(args, capsys):
    """Run main() with ``args``; return (exit code, parsed JSON result)."""
    with patch_module_args(args), pytest.raises(SystemExit) as exit_info:
        sglang_health.main()
    return exit_info.value.code, json.loads(capsys.readouterr().out)


def test_all_checks_pass(server, capsys):
    code, result = run_module(
        {
            "url": server.url,
            "api_key": API_KEY,
            "served_model_name": MODEL,
            "checks": ["health", "models", "exact", "math", "short_max_tokens", "decode"],
            "decode_runs": 2,
        },
        capsys,
    )
    assert code == 0, result
    assert result["changed"] is False
    assert result["passed"] is True
    assert "failed" not in result
    assert set(result["checks"]) == {
        "health",
        "models",
        "exact",
        "math",
        "short_max_tokens",
        "decode",
    }
    assert all(check["passed"] for check in result["checks"].values())
    assert isinstance(result["decode_tokens_per_s"], float)
    assert result["decode_tokens_per_s"] == result["checks"]["decode"]["tokens_per_s"]
    assert len(result["checks"]["decode"]["runs"]) == 2
    assert API_KEY not in json.dumps(result)
    assert all(p["model"] == MODEL for p in server.handler.seen)
    assert all(p["chat_template_kwargs"] == {"enable_thinking": False} for p in server.handler.seen)


def test_defaults_run_health_and_models(server, capsys):
    code, result = run_module({"url": server.url, "api_key": API_KEY}, capsys)
    assert code == 0, result
    assert list(result["checks"]) == ["health", "models"]
    assert result["decode_tokens_per_s"] is None
    assert server.handler.seen == []


def test_check_mode_runs_the_checks(server, capsys):
    code, result = run_module(
        {
            "url": server.url,
            "api_key": API_KEY,
            "served_model_name": MODEL,
            "checks": ["exact"],
            "_ansible_check_mode": True,
        },
        capsys,
    )
    assert code == 0, result
    assert result["changed"] is False
    assert result["checks"]["exact"]["passed"] is True


@pytest.mark.parametrize("api_key", [None, "not-the-key"])
def test_bad_api_key_fails_naming_the_variable(server, capsys, api_key):
    args = {"url": server.url, "served_model_name": MODEL, "checks": ["health", "models", "exact"]}
    if api_key:
        args["api_key"] = api_key
    code, result = run_module(args, capsys)
    assert code == 1
    assert result["failed"] is True
    assert result["changed"] is False
    assert result["passed"] is False
    assert result["msg"].startswith(f"SGLang at {server.url} failed models: models: HTTP 401")
    assert "API key is missing or wrong" in result["msg"]
    assert "sglang_api_key" in result["msg"]
    assert result["checks"]["health"]["passed"] is True
    assert result["checks"]["exact"]["skipped"] is True
    assert "not-the-key" not in json.dumps(result)
    assert API_KEY not in json.dumps(result)


def test_wrong_math_answer_fails_with_evidence(server, capsys):
    server.handler.math_answer = "324"
    code, result = run_module(
        {
            "url": server.url,
            "api_key": API_KEY,
            "served_model_name": MODEL,
            "checks": ["math", "exact"],
        },
        capsys,
    )
    assert code == 1
    assert result["msg"] == (
        f"SGLang at {server.url} failed math: math: expected 323, got '324' (HTTP 200)"
    )
    assert result["checks"]["exact"]["passed"] is True
    assert result["decode_tokens_per_s"] is None


@pytest.mark.parametrize(
    "args, problem",
    [
        ({"url": "127.0.0.1:8081"}, "url must start with http:// or https://"),
        ({"url": "http://127.0.0.1:1", "checks": ["exact"]}, "served_model_name is required"),
        ({"url": "http://127.0.0.1:1", "decode_runs": 0}, "decode_runs must be at least 1"),
        ({"url": "http://127.0.0.1:1", "checks": ["bogus"]}, "checks must be one or more of"),
    ],
)
def test_invalid_arguments(capsys, args, problem):
    code, result = run_module(args, capsys)
    assert code == 1
    assert problem in result["msg"]
    assert result.get("changed", False) is False
