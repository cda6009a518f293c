"""A small asyncio HTTP/1.1 server: keep-alive, JSON bodies, chunked SSE streams.

Access lines are printed like uvicorn's (``INFO:     ip:port - "GET /x HTTP/1.1" 200 OK``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from http import HTTPStatus
from urllib.parse import urlsplit

MAX_HEADER = 64 * 1024
MAX_BODY = 64 * 1024 * 1024


class Request:
    def __init__(self, method, target, version, headers, body, peer):
        self.method = method
        parts = urlsplit(target)
        self.path = parts.path or "/"
        self.query = parts.query
        self.version = version
        self.headers = headers
        self.body = body
        self.peer = peer
        self.disconnected = asyncio.Event()

    def json(self):
        return json.loads(self.body or b"null")

    @property
    def line(self):
        return f"{self.method} {self.path} {self.version}"


class Response:
    def __init__(self, status=200, body=b"", content_type="application/json", headers=None):
        self.status = status
        if isinstance(body, (dict, list)):
            body = json.dumps(body, separators=(",", ":")).encode()
        elif isinstance(body, str):
            body = body.encode()
        self.body = body
        self.content_type = content_type if body else None
        self.headers = headers or {}


class StreamResponse:
    """Body from an async iterator of str/bytes chunks (sent chunked)."""

    def __init__(
        self, chunks, status=200, content_type="text/event-stream", headers=None, on_close=None
    ):
        self.status = status
        self.chunks = chunks
        self.on_close = on_close
        self.content_type = content_type
        self.headers = headers or {}


def json_response(obj, status=200):
    return Response(status, obj)


def _status_line(status):
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = ""
    return f"HTTP/1.1 {status} {phrase}\r\n", phrase


def access_log(request, status, phrase):
    host, port = request.peer[:2] if request.peer else ("-", 0)
    print(f'INFO:     {host}:{port} - "{request.line}" {status} {phrase}', flush=True)


async def _read_request(reader, peer):
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    except asyncio.LimitOverrunError:
        raise ValueError("header too large") from None
    lines = head.decode("latin-1").split("\r\n")
    method, target, version = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            key, value = line.split(":", 1)
            headers[key.strip().lower()] = value.strip()
    return method.upper(), target, version.strip(), headers


async def _read_body(reader, writer, headers):
    if headers.get("expect", "").lower() == "100-continue":
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        await writer.drain()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = b""
        while True:
            size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                await reader.readline()
                return body
            body += await reader.readexactly(size)
            await reader.readline()
            if len(body) > MAX_BODY:
                raise ValueError("body too large")
    length = int(headers.get("content-length") or 0)
    if length > MAX_BODY:
        raise ValueError("body too large")
    return await reader.readexactly(length) if length else b""


async def _send(writer, request, response, keep_alive):
    status_line, phrase = _status_line(response.status)
    head = [status_line]
    headers = dict(response.headers)
    if response.content_type:
        headers.setdefault("content-type", response.content_type)
    headers.setdefault("server", "uvicorn")
    if not keep_alive:
        headers["connection"] = "close"
    if isinstance(response, StreamResponse):
        headers["transfer-encoding"] = "chunked"
        headers.setdefault("cache-control", "no-cache")
    else:
        headers["content-length"] = str(len(response.body))
    for key, value in headers.items():
        head.append(f"{key}: {value}\r\n")
    head.append("\r\n")
    writer.write("".join(head).encode("latin-1"))
    access_log(request, response.status, phrase)
    if isinstance(response, StreamResponse):
        try:
            async for chunk in response.chunks:
                if isinstance(chunk, str):
                    chunk = chunk.encode()
                if not chunk:
                    continue
                writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                await writer.drain()
        finally:
            for close in (getattr(response.chunks, "aclose", None), response.on_close):
                if close is not None:
                    await close()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
    else:
        if request.method != "HEAD":
            writer.write(response.body)
        await writer.drain()


async def _watch_disconnect(reader, request):
    """Set request.disconnected when the client goes away (EOF while streaming)."""
    try:
        data = await reader.read(1)
    except (ConnectionError, OSError):
        data = b""
    if not data:
        request.disconnected.set()


def make_handler(route):
    """An asyncio.start_server callback dispatching every request to `route(request)`."""

    async def handle(reader, writer):
        peer = writer.get_extra_info("peername")
        try:
            while True:
                try:
                    parsed = await _read_request(reader, peer)
                    if parsed is None:
                        return
                    method, target, version, headers = parsed
                    body = await _read_body(reader, writer, headers)
                except (ValueError, asyncio.IncompleteReadError):
                    writer.write(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
                    await writer.drain()
                    return
                request = Request(method, target, version, headers, body, peer)
                keep_alive = (
                    version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
                )
                response = await route(request)
                watcher = None
                if isinstance(response, StreamResponse):
                    watcher = asyncio.ensure_future(_watch_disconnect(reader, request))
                    keep_alive = False
                try:
                    await _send(writer, request, response, keep_alive)
                except (ConnectionError, OSError):
                    request.disconnected.set()
                    return
                finally:
                    if watcher is not None:
                        watcher.cancel()
                if not keep_alive:
                    return
        except (ConnectionError, OSError):
            return
        except Exception as exc:  # one bad request must not kill the server
            print(f"ERROR:    Exception in ASGI application: {exc!r}", file=sys.stderr, flush=True)
        finally:
            with contextlib.suppress(ConnectionError, OSError, RuntimeError):
                writer.close()

    return handle


async def start(host, port, route):
    return await asyncio.start_server(
        make_handler(route), host=host, port=port, reuse_address=True, limit=MAX_HEADER
    )
