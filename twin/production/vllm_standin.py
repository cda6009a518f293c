#!/usr/bin/env python3
"""The twin's stand-in for seed 000's production engine (Anemll vLLM under compose).

Two roles, one per node, like a two-node vLLM behind Ray:

  worker: listens on --worker-port; the head must reach it before it serves.
  head:   connects to every --worker address (exits 1 if one stays unreachable:
          start the workers first), "loads" for VLLM_STANDIN_LOAD_S, then serves an
          OpenAI-compatible API on --port: /health, /v1/models, /v1/chat/completions
          (streamed or not, usage included) with deterministic answers (exact
          string, NxM, counting) at VLLM_STANDIN_DECODE_TPS tokens/s. A lost worker
          takes the head down, as a lost Ray node does.

Every start logs the environment variables named in VLLM_STANDIN_LOG_ENV, so the
live environment is visible in the container log as well as in docker inspect.
Standard library only.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import signal
import socket
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

EXACT = re.compile(r"exactly[^:]*:\s*(\S+)", re.IGNORECASE)
PRODUCT = re.compile(r"(\d+)\s*[*\u00d7x]\s*(\d+)")
COUNT = re.compile(r"count from 1 to (\d+)", re.IGNORECASE)


def log(msg):
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} vllm-standin: {msg}", flush=True)


def answer(prompt):
    match = EXACT.search(prompt)
    if match:
        return [match.group(1)]
    match = PRODUCT.search(prompt)
    if match:
        return [str(int(match.group(1)) * int(match.group(2)))]
    match = COUNT.search(prompt)
    if match:
        return [str(i) for i in range(1, int(match.group(1)) + 1)]
    return itertools.cycle(
        ["the", "production", "lane", "keeps", "serving", "while", "the", "canary", "waits"]
    )


def worker(port):
    srv = socket.create_server(("0.0.0.0", port), reuse_port=True)
    log(f"worker listening on 0.0.0.0:{port}")
    while True:
        conn, peer = srv.accept()
        log(f"head joined from {peer[0]}")
        threading.Thread(target=_hold, args=(conn,), daemon=True).start()


def _hold(conn):
    with conn:
        while conn.recv(64):
            pass


def join_workers(addrs, wait_s):
    conns = []
    for addr in addrs:
        host, port = addr.rsplit(":", 1)
        deadline = time.monotonic() + wait_s
        while True:
            try:
                conns.append(socket.create_connection((host, int(port)), timeout=2))
                log(f"worker {addr} joined")
                break
            except OSError as exc:
                if time.monotonic() > deadline:
                    log(f"worker {addr} unreachable for {wait_s}s ({exc}): start the workers first")
                    sys.exit(1)
                time.sleep(0.5)
    for conn in conns:
        threading.Thread(target=_watch, args=(conn,), daemon=True).start()


def _watch(conn):
    conn.settimeout(None)
    try:
        while conn.recv(64):
            pass
    except OSError:
        pass
    log("lost a worker: exiting")
    os._exit(1)


class Api(BaseHTTPRequestHandler):
    served = "model"
    tps = 100.0

    def log_message(self, fmt, *args):
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
        elif self.path == "/v1/models":
            self._json(200, {"object": "list", "data": [{"id": self.served, "object": "model"}]})
        else:
            self._json(404, {"error": "not found"})

    def do_POST(self):
        if self.path != "/v1/chat/completions":
            self._json(404, {"error": "not found"})
            return
        req = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        prompt = " ".join(str(m.get("content", "")) for m in req.get("messages", []))
        limit = int(req.get("max_tokens") or 128)
        words = list(itertools.islice(answer(prompt), limit))
        rid = "chatcmpl-" + uuid.uuid4().hex
        finish = "length" if len(words) >= limit else "stop"
        usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": len(words)}
        if not req.get("stream"):
            time.sleep(len(words) / self.tps)
            msg = {"role": "assistant", "content": " ".join(words)}
            self._json(
                200,
                {
                    "id": rid,
                    "object": "chat.completion",
                    "model": self.served,
                    "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
                    "usage": usage,
                },
            )
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for index, word in enumerate(words):
            time.sleep(1.0 / self.tps)
            delta = {"content": word if index == 0 else " " + word}
            last = index == len(words) - 1
            chunk = {
                "id": rid,
                "object": "chat.completion.chunk",
                "model": self.served,
                "choices": [
                    {"index": 0, "delta": delta, "finish_reason": finish if last else None}
                ],
            }
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
        tail = {"id": rid, "object": "chat.completion.chunk", "choices": [], "usage": usage}
        self.wfile.write(f"data: {json.dumps(tail)}\n\ndata: [DONE]\n\n".encode())
        self.wfile.flush()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("role", choices=["head", "worker"])
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--worker-port", type=int, default=8001)
    parser.add_argument("--worker", action="append", default=[], help="host:port of a worker")
    parser.add_argument("--served-model-name", default="model")
    args = parser.parse_args()
    # PID 1 in its container: exit on docker stop's SIGTERM instead of waiting for SIGKILL.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    for name in os.environ.get("VLLM_STANDIN_LOG_ENV", "").split(","):
        if name:
            log(f"env {name}={os.environ.get(name, '<unset>')}")
    if args.role == "worker":
        worker(args.worker_port)
        return
    join_workers(args.worker, float(os.environ.get("VLLM_STANDIN_JOIN_S", "20")))
    time.sleep(float(os.environ.get("VLLM_STANDIN_LOAD_S", "1")))
    Api.served = args.served_model_name
    Api.tps = float(os.environ.get("VLLM_STANDIN_DECODE_TPS", "100"))
    server = ThreadingHTTPServer(("0.0.0.0", args.port), Api)
    server.daemon_threads = True
    log(f"serving {args.served_model_name} on 0.0.0.0:{args.port}")
    server.serve_forever()


if __name__ == "__main__":
    main()
