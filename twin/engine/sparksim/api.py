"""Rank 0's HTTP API and the tokenizer-manager side of the pipeline.

Every request's sampling params go through the REAL
``TokenizerManager._validate_one_request`` of the mounted tokenizer_manager.py
(patched or not) before the scheduler child sees them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import time
import uuid

from sparksim import http, metrics, model, upstream

logger = logging.getLogger("sglang.srt.entrypoints.http_server")

HEALTH_CHECK_TIMEOUT = int(os.environ.get("SGLANG_HEALTH_CHECK_TIMEOUT", "20"))
WARMUP_PROMPT = "The capital city of France is"


def _clock(stamp):
    return time.strftime("%H:%M:%S", time.localtime(stamp))


def _env_bool(name, default):
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in ("1", "true", "yes", "on")


def decide_auth(method, path, authorization, api_key):
    """upstream sglang.srt.utils.auth.decide_request_auth for NORMAL endpoints."""
    if method == "OPTIONS" or path.startswith("/health") or path.startswith("/metrics"):
        return True
    if not api_key:
        return True
    if not authorization:
        return False
    parts = authorization.split(" ", 1)
    if len(parts) != 2 or parts[0].lower() != "bearer":
        return False
    return secrets.compare_digest(parts[1], api_key)


class Frontend:
    """TokenizerManager stand-in: validates, forwards to the scheduler, routes outputs."""

    def __init__(self, args, tm_module, context_len, version):
        self.args = args
        self.module = tm_module
        self.context_len = context_len
        self.version = version
        self.validator = upstream.make_validator(tm_module, context_len)
        self.queues = {}
        self.last_receive_tstamp = 0.0
        self.status = "Starting"
        self.writer = None
        self.crash_on_abort = _env_bool("SPARKSIM_ABORT_CRASH", False)
        # SGLang's /metrics (sparksim/metrics.py); token usage against the context length of
        # the scheduler's running-request limit.
        self.metrics = metrics.Metrics(
            args.served_model_name, context_len * int(getattr(args, "max_running_requests", 0) or 1)
        )

    async def attach(self, sock):
        reader, self.writer = await asyncio.open_connection(sock=sock, limit=16 * 1024 * 1024)
        self._reader_task = asyncio.ensure_future(self._read_loop(reader))

    async def _read_loop(self, reader):
        while True:
            line = await reader.readline()
            if not line:
                return  # scheduler gone: its SIGQUIT/exit path handles the process
            msg = json.loads(line)
            self.last_receive_tstamp = time.time()
            if msg.get("op") == "out":
                for rid, word, finish in msg["items"]:
                    q = self.queues.get(rid)
                    if q is not None:
                        q.put_nowait((word, finish))
            elif msg.get("op") == "health_ok":
                q = self.queues.get(msg["rid"])
                if q is not None:
                    q.put_nowait((None, "health"))

    def _send(self, msg):
        self.writer.write((json.dumps(msg, separators=(",", ":")) + "\n").encode())

    def validate(self, prompt_words, sampling_params, rid):
        """Run the real _validate_one_request; returns the validated max_new_tokens."""
        req = upstream.make_request(self.module, sampling_params, rid=rid)
        self.validator._validate_one_request(req, list(range(prompt_words)))
        return req.sampling_params.get("max_new_tokens")

    async def generate(self, prompt, key_text, sampling_params, rid, request=None, warmup=False):
        """Async iterator of (word, finish). Raises ValueError on validation errors."""
        n_prompt = len(model.tokens(prompt))
        max_new = self.validate(n_prompt, sampling_params, rid)
        if max_new is None:
            max_new = model.DEFAULT_MAX_NEW_TOKENS
        q = asyncio.Queue()
        self.queues[rid] = q
        self.metrics.started(rid, n_prompt)
        self._send(
            {
                "op": "gen",
                "rid": rid,
                "prompt": key_text,
                "input_len": n_prompt,
                "max_new_tokens": int(max_new),
                "health": rid.startswith("HEALTH_CHECK"),
                "warmup": warmup,
            }
        )
        return self._stream(rid, q, request), n_prompt

    async def _stream(self, rid, q, request):
        finished = False
        try:
            while True:
                if request is not None and request.disconnected.is_set():
                    break
                getter = asyncio.ensure_future(q.get())
                waits = {getter}
                if request is not None:
                    waits.add(asyncio.ensure_future(request.disconnected.wait()))
                done, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                for task in pending:
                    task.cancel()
                if getter not in done:
                    break
                word, finish = getter.result()
                if word is not None:
                    self.metrics.token(rid)
                yield word, finish
                if finish:
                    finished = True
                    return
        finally:
            self.queues.pop(rid, None)
            self.metrics.finished(rid)
            if not finished:
                self._abort(rid)

    def _abort(self, rid):
        if self.crash_on_abort:
            # Seed Pitfall 4: an abort mid-decode hits the DFlash2 async-generator edge.
            logger.error(
                f"Exception in streaming response for rid={rid}: RuntimeError: aclose(): "
                "asynchronous generator is already running"
            )
            for _ in range(3):
                logger.error("asyncio.exceptions.CancelledError")
        self._send({"op": "abort", "rid": rid, "crash": self.crash_on_abort})

    async def health_generate(self):
        """upstream /health_generate: any scheduler output within the timeout is healthy."""
        if self.status == "Starting":
            return 503
        rid = f"HEALTH_CHECK_{time.time()}"
        tic = time.time()
        stream, _ = await self.generate("", "", {"max_new_tokens": 1, "temperature": 0.0}, rid)

        async def drain():
            async for _ in stream:
                pass

        task = asyncio.ensure_future(drain())
        try:
            while time.time() < tic + HEALTH_CHECK_TIMEOUT:
                await asyncio.sleep(0.05)
                if self.last_receive_tstamp > tic:
                    self.status = "Up"
                    return 200
            logger.error(
                "Health check failed. Server couldn't get a response from detokenizer for last "
                f"{HEALTH_CHECK_TIMEOUT} seconds. tic start time: {_clock(tic)}. "
                f"last_heartbeat time: {_clock(self.last_receive_tstamp)}"
            )
            self.status = "UnHealthy"
            return 503
        finally:
            task.cancel()

    async def warmup(self):
        rid = f"WARMUP_{uuid.uuid4().hex}"
        stream, _ = await self.generate(
            WARMUP_PROMPT, WARMUP_PROMPT, {"temperature": 0, "max_new_tokens": 8}, rid, warmup=True
        )
        async for _ in stream:
            pass
        self.status = "Up"


def _error(message, status=400, err_type="BadRequestError"):
    return http.json_response(
        {"object": "error", "message": message, "type": err_type, "param": None, "code": status},
        status,
    )


def _sampling_params(body, max_key_names):
    params = {}
    for key in max_key_names:
        if body.get(key) is not None:
            params["max_new_tokens"] = body[key]
            break
    else:
        params["max_new_tokens"] = None
    for key in ("temperature", "top_p", "top_k", "stop", "ignore_eos"):
        if key in body:
            params[key] = body[key]
    return params


class Api:
    def __init__(self, frontend):
        self.fe = frontend
        self.args = frontend.args

    # ---- helpers -------------------------------------------------------
    def _usage(self, prompt_tokens, completion_tokens):
        return {
            "prompt_tokens": prompt_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "completion_tokens": completion_tokens,
            "prompt_tokens_details": None,
            "reasoning_tokens": 0,
        }

    async def _run(self, prompt, key_text, params, rid, request):
        try:
            stream, n_prompt = await self.fe.generate(prompt, key_text, params, rid, request)
        except ValueError as exc:
            return None, str(exc), 0
        return stream, None, n_prompt

    # ---- routing -------------------------------------------------------
    async def route(self, request):
        if not decide_auth(
            request.method, request.path, request.headers.get("authorization"), self.args.api_key
        ):
            return http.json_response({"error": "Unauthorized"}, 401)
        routes = {
            "/health": ("GET", self.health),
            "/health_generate": ("GET", self.health_generate),
            "/v1/models": ("GET", self.models),
            "/v1/chat/completions": ("POST", self.chat),
            "/v1/completions": ("POST", self.completions),
            "/generate": ("POST", self.generate),
            "/get_server_info": ("GET", self.server_info),
            "/server_info": ("GET", self.server_info),
            "/get_model_info": ("GET", self.model_info),
            "/model_info": ("GET", self.model_info),
            "/ping": ("GET", self.ping),
        }
        if self.args.enable_metrics:
            routes["/metrics"] = ("GET", self.metrics)
        entry = routes.get(request.path.rstrip("/") or "/")
        if entry is None:
            return http.json_response({"detail": "Not Found"}, 404)
        method, handler = entry
        if request.method not in (method, "HEAD") and not (
            request.path.startswith("/health") and request.method == "POST"
        ):
            return http.json_response({"detail": "Method Not Allowed"}, 405)
        try:
            return await handler(request)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            return _error(f"invalid request: {exc}")

    # ---- endpoints -----------------------------------------------------
    async def ping(self, request):
        return http.Response(200)

    async def health(self, request):
        if not _env_bool("SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION", True):
            return http.Response(200 if self.fe.status != "Starting" else 503)
        return http.Response(await self.fe.health_generate())

    async def health_generate(self, request):
        return http.Response(await self.fe.health_generate())

    async def models(self, request):
        name = self.args.served_model_name
        return http.json_response(
            {
                "object": "list",
                "data": [
                    {
                        "id": name,
                        "object": "model",
                        "created": int(time.time()),
                        "owned_by": "sglang",
                        "root": name,
                        "parent": None,
                        "max_model_len": self.fe.context_len,
                    }
                ],
            }
        )

    async def model_info(self, request):
        config = model.model_config(self.args.model_path)
        return http.json_response(
            {
                "model_path": self.args.model_path,
                "tokenizer_path": self.args.tokenizer_path,
                "is_generation": True,
                "preferred_sampling_params": None,
                "weight_version": "default",
                "has_image_understanding": False,
                "has_audio_understanding": False,
                "model_type": config.get("model_type"),
                "architectures": config.get("architectures"),
            }
        )

    async def server_info(self, request):
        from sparksim import args as argmod

        info = argmod.as_dict(self.args)
        info.update(
            {
                "version": self.fe.version,
                "status": self.fe.status,
                "context_len": self.fe.context_len,
                "internal_states": [{"running_requests": self.fe.metrics.num_running}],
            }
        )
        return http.json_response(info)

    async def metrics(self, request):
        return http.Response(200, self.fe.metrics.text(), "text/plain; version=0.0.4")

    async def generate(self, request):
        body = request.json() or {}
        text = body.get("text")
        if isinstance(text, list):
            text = text[0] if text else ""
        if text is None and body.get("input_ids") is not None:
            text = " ".join(str(i) for i in body["input_ids"])
        params = dict(body.get("sampling_params") or {})
        params.setdefault("max_new_tokens", None)
        rid = str(body.get("rid") or uuid.uuid4().hex)
        created = time.time()
        stream, err, n_prompt = await self._run(text, text, params, rid, request)
        if err:
            return http.json_response({"error": {"message": err}}, 400)

        def meta(count, finish):
            reason = None
            if finish == "length":
                reason = {"type": "length", "length": count}
            elif finish == "stop":
                reason = {"type": "stop", "matched": 151645}
            return {
                "id": rid,
                "finish_reason": reason,
                "prompt_tokens": n_prompt,
                "completion_tokens": count,
                "cached_tokens": 0,
                "e2e_latency": round(time.time() - created, 4),
            }

        if body.get("stream"):

            async def chunks():
                words = []
                async for word, finish in stream:
                    if word is not None:
                        words.append(word)
                    payload = {
                        "text": " ".join(words),
                        "output_ids": list(range(len(words))),
                        "meta_info": meta(len(words), finish),
                    }
                    yield f"data: {json.dumps(payload, separators=(',', ':'))}\n\n"
                yield "data: [DONE]\n\n"

            return http.StreamResponse(chunks(), on_close=stream.aclose)
        words, finish = [], None
        async for word, last in stream:
            if word is not None:
                words.append(word)
            finish = last
        return http.json_response(
            {
                "text": " ".join(words),
                "output_ids": list(range(len(words))),
                "meta_info": meta(len(words), finish),
            }
        )

    async def completions(self, request):
        body = request.json() or {}
        prompt = body.get("prompt")
        if isinstance(prompt, list):
            prompt = prompt[0] if prompt else ""
        prompt = str(prompt or "")
        return await self._openai(request, body, prompt, prompt, chat=False)

    async def chat(self, request):
        body = request.json() or {}
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return _error("messages must be a non-empty list")
        prompt, last_user = model.chat_prompt(messages)
        return await self._openai(request, body, prompt, last_user or prompt, chat=True)

    async def _openai(self, request, body, prompt, key_text, chat):
        params = _sampling_params(body, ("max_tokens", "max_completion_tokens"))
        rid = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}"
        stream, err, n_prompt = await self._run(prompt, key_text, params, rid, request)
        if err:
            return _error(err)
        model_name = body.get("model") or self.args.served_model_name
        created = int(time.time())
        obj = "chat.completion" if chat else "text_completion"

        def choice(text, finish, delta=False):
            if chat and delta:
                c = {"index": 0, "delta": text, "logprobs": None, "finish_reason": finish}
            elif chat:
                c = {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": text,
                        "reasoning_content": None,
                        "tool_calls": None,
                    },
                    "logprobs": None,
                    "finish_reason": finish,
                }
            else:
                c = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
            c["matched_stop"] = 151645 if finish == "stop" else None
            return c

        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))

            def chunk(choices, usage=None):
                payload = {
                    "id": rid,
                    "object": obj + ".chunk" if chat else obj,
                    "created": created,
                    "model": model_name,
                    "choices": choices,
                    "usage": usage,
                }
                return f"data: {json.dumps(payload, separators=(',', ':'))}\n\n"

            async def chunks():
                count = 0
                if chat:
                    yield chunk([choice({"role": "assistant", "content": ""}, None, delta=True)])
                final = None
                async for word, finish in stream:
                    if word is not None:
                        text = word if count == 0 else " " + word
                        count += 1
                        yield chunk([choice({"content": text} if chat else text, None, True)])
                    if finish:
                        final = finish
                yield chunk([choice({} if chat else "", final, delta=True)])
                if include_usage:
                    yield chunk([], self._usage(n_prompt, count))
                yield "data: [DONE]\n\n"

            return http.StreamResponse(chunks(), on_close=stream.aclose)

        words, finish = [], None
        async for word, last in stream:
            if word is not None:
                words.append(word)
            finish = last
        return http.json_response(
            {
                "id": rid,
                "object": obj,
                "created": created,
                "model": model_name,
                "choices": [choice(" ".join(words), finish)],
                "usage": self._usage(n_prompt, len(words)),
                "metadata": {"weight_version": "default"},
            }
        )


async def dummy_route(request):
    """upstream launch_dummy_health_check_server: what a worker node answers."""
    if request.path in ("/health", "/health_generate", "/ping"):
        return http.Response(200)
    return http.json_response({"detail": "Not Found"}, 404)


async def dummy_metrics_route(request):
    """With --enable-metrics upstream adds its Prometheus middleware to the worker's server:
    /metrics answers with what the node's own processes export (no scheduler metrics, those
    are tp_rank 0's, on the head)."""
    if request.path == "/metrics":
        return http.Response(200, "", "text/plain; version=0.0.4")
    return await dummy_route(request)
