#!/usr/bin/env python3
"""The twin mirror's thin front: the real mirror (olah) sits behind it.

Hand-written because no mirror does these test-only things: it counts the body
bytes served per file (so tests can assert "each file served once per cluster"),
can advertise Xet the way huggingface.co does (X-Xet-Hash and a Link rel="xet-auth"
token route that answers 401: seed Pitfall 7 as in the field), and can slow the
bodies down so a test can kill a download half-way. Everything else is passed to
olah untouched.

It also lists every request that carried an Authorization header ("authorized": method and
path, never the header's value), so a test can prove a token was, or was not, sent here.

Control routes (the twin's tests only): GET /_sparksim/stats, POST /_sparksim/reset,
POST /_sparksim/config with JSON {"xet": bool, "rate_bytes_s": int, "fail_after_bytes": int}.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

UPSTREAM = ("127.0.0.1", 8091)
RESOLVE = re.compile(r"^/(?:models/)?([^/]+/[^/]+)/resolve/([^/]+)/(.+?)(?:\?.*)?$")
XET_TOKEN = re.compile(r"^/api/models/[^/]+/[^/]+/xet-read-token/")
HOP = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "proxy-authorization",
}

LOCK = threading.Lock()
STATE = {
    "config": {"xet": False, "rate_bytes_s": 0, "fail_after_bytes": 0},
    "files": {},
    "requests": [],
    "authorized": [],
    "served": 0,
}


def log(msg: str) -> None:
    print(f"sparksim-mirror-front: {msg}", file=sys.stderr, flush=True)


class Front(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        log(f"{self.command} {self.path} " + (fmt % args))

    def _send_json(self, code: int, body: dict) -> None:
        data = json.dumps(body, sort_keys=True).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _control(self) -> bool:
        if not self.path.startswith("/_sparksim/"):
            return False
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}") if length else {}
        with LOCK:
            if self.path == "/_sparksim/reset":
                STATE["files"].clear()
                STATE["requests"].clear()
                STATE["authorized"].clear()
                STATE["served"] = 0
            elif self.path == "/_sparksim/config":
                STATE["config"].update(body)
                log(f"config now {STATE['config']}")
            snapshot = json.loads(json.dumps(STATE))
        self._send_json(200, snapshot)
        return True

    def _proxy(self) -> None:
        if self._control():
            return
        with LOCK:
            config = dict(STATE["config"])
            STATE["requests"].append(f"{self.command} {self.path}")
            if self.headers.get("Authorization"):
                STATE["authorized"].append(f"{self.command} {self.path}")
        if XET_TOKEN.match(self.path):
            # huggingface.co answers the token route only to an authorised client; a
            # mirror cannot proxy Xet storage, which is what Pitfall 7 looked like.
            self._send_json(401, {"error": "Invalid credentials in Authorization header"})
            return
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP | {"host"}}
        conn = http.client.HTTPConnection(*UPSTREAM, timeout=120)
        conn.request(self.command, self.path, body=body, headers=headers)
        resp = conn.getresponse()
        match = RESOLVE.match(self.path)
        self.send_response(resp.status)
        for key, value in resp.getheaders():
            if key.lower() in HOP or key.lower() in ("content-length", "date", "server"):
                continue
            if key.lower() == "location":
                value = re.sub(r"^https?://[^/]+", "", value)
            self.send_header(key, value)
        if match and config.get("xet") and resp.status < 400:
            repo, rev, _name = match.groups()
            self.send_header("X-Xet-Hash", hashlib.sha256(self.path.encode()).hexdigest())
            host = self.headers.get("Host", "")
            self.send_header(
                "Link", f'<http://{host}/api/models/{repo}/xet-read-token/{rev}>; rel="xet-auth"'
            )
        data = b"" if self.command == "HEAD" else resp.read()
        declared = resp.getheader("Content-Length")
        self.send_header(
            "Content-Length", declared if self.command == "HEAD" and declared else str(len(data))
        )
        self.end_headers()
        conn.close()
        if self.command == "HEAD":
            return
        rate = int(config.get("rate_bytes_s") or 0)
        # fail_after_bytes: the connection drops once the mirror has served that many body
        # bytes since the last reset (an interrupted download, half-way through a file).
        limit = int(config.get("fail_after_bytes") or 0)
        sent = 0
        try:
            chunk = max(1024, rate // 10) if rate else 64 * 1024
            for start in range(0, len(data), chunk):
                piece = data[start : start + chunk]
                with LOCK:
                    over = limit and STATE["served"] + len(piece) > limit
                    if not over:
                        STATE["served"] += len(piece)
                if over:
                    log(
                        f"dropping the connection after {sent} bytes of {self.path} "
                        "(fail_after_bytes)"
                    )
                    self.close_connection = True
                    return
                self.wfile.write(piece)
                sent += len(piece)
                if rate:
                    time.sleep(len(piece) / rate)
        finally:
            if match and self.command == "GET":
                key = f"{match.group(1)}/{match.group(3)}"
                with LOCK:
                    entry = STATE["files"].setdefault(key, {"bytes": 0, "gets": 0})
                    entry["bytes"] += sent
                    entry["gets"] += 1

    do_GET = do_HEAD = do_POST = _proxy


def main() -> int:
    host, port = sys.argv[1], int(sys.argv[2])
    server = ThreadingHTTPServer((host, port), Front)
    server.daemon_threads = True
    log(f"listening on {host}:{port}, upstream olah at {UPSTREAM[0]}:{UPSTREAM[1]}")
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
