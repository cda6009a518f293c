# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Health and smoke checks against an SGLang HTTP server.

Private to sparkfleet.serving: the checks behind the ``sglang_health`` module.
Standard library only, so the module runs on a bare node whose API listens on
loopback. The HTTP client talks ``http.client`` directly (no proxy handling:
the server is local), everything else is pure and unit-tested.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import math
import re
import secrets
import socket
import statistics
import time
from urllib.parse import urlsplit

CHECK_NAMES = ("health", "models", "exact", "math", "short_max_tokens", "decode")
CHAT_CHECKS = ("exact", "math", "short_max_tokens", "decode")
DEFAULT_CHECKS = ("health", "models")

HEALTH_PATH = "/health"
MODELS_PATH = "/v1/models"
CHAT_PATH = "/v1/chat/completions"
METRICS_PATH = "/metrics"
# SGLang's own metric names (--enable-metrics; python/sglang/srt/metrics/collector.py):
# the requests being decoded now (gauge) and the tokens generated so far (counter).
RUNNING_REQS_METRIC = "sglang:num_running_reqs"
GENERATION_TOKENS_METRIC = "sglang:generation_tokens_total"

EXACT_PREFIX = "SPARKFLEET-"
EXACT_PROMPT = "Reply with exactly this string and nothing else: {token}"
MATH_PROMPT = "What is 17*19? Answer with the number only."
MATH_ANSWER = "323"
SHORT_PROMPT = "Count from 1 to 10, separated by spaces."
DECODE_PROMPT = "Count from 1 to 400, separated by spaces."
# Room for a short answer, and well above the speculative-decoding window that
# a max_tokens <= 8 request hits on an unpatched server.
ANSWER_MAX_TOKENS = 128

EXCERPT_CHARS = 200
API_KEY_HINT = (
    "the API key is missing or wrong: set the sglang_api_key variable to the key "
    "the server was launched with (--api-key)"
)

# One sample line of the Prometheus text format: name, optional {labels}, value.
_SAMPLE_RE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{.*\})?[ \t]+(\S+)")
_MATH_RE = re.compile(r"(?<![\d.])" + MATH_ANSWER + r"(?!\d|\.\d)")


class TransportError(Exception):
    """The request got no HTTP answer: refused, reset, timed out, bad stream."""


def parse_base_url(url):
    """Split a base URL into (scheme, host, port, path prefix); ValueError if unusable."""
    parts = urlsplit(url or "")
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"url must start with http:// or https://, got {url!r}")
    if not parts.hostname:
        raise ValueError(f"url has no host: {url!r}")
    try:
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"url has an invalid port: {url!r}") from exc
    if port is None:
        port = 443 if parts.scheme == "https" else 80
    return parts.scheme, parts.hostname, port, parts.path.rstrip("/")


def normalize_checks(checks):
    """Return the requested checks once each, in the order given; ValueError on unknown names."""
    if checks is None:
        return list(DEFAULT_CHECKS)
    unknown = [name for name in checks if name not in CHECK_NAMES]
    if unknown:
        raise ValueError(
            "unknown check(s) {}; choose from {}".format(", ".join(unknown), ", ".join(CHECK_NAMES))
        )
    ordered = []
    for name in checks:
        if name not in ordered:
            ordered.append(name)
    return ordered


def validate_params(params):
    """Return a list of problems with the module parameters (empty when usable)."""
    errors = []
    try:
        parse_base_url(params.get("url"))
    except ValueError as exc:
        errors.append(str(exc))
    try:
        checks = normalize_checks(params.get("checks"))
    except ValueError as exc:
        errors.append(str(exc))
        checks = []
    wanted_chat = [name for name in checks if name in CHAT_CHECKS]
    if wanted_chat and not params.get("served_model_name"):
        errors.append(
            "served_model_name is required for the check(s) {}".format(", ".join(wanted_chat))
        )
    minimums = (
        ("timeout", 0),
        ("request_timeout", 1),
        ("poll_interval", 0),
        ("decode_runs", 1),
        ("decode_max_tokens", 2),
        ("short_max_tokens", 1),
    )
    for name, minimum in minimums:
        value = params.get(name)
        if value is not None and value < minimum:
            errors.append(f"{name} must be at least {minimum}, got {value}")
    return errors


def make_exact_token():
    """Return a fresh token for the exact-string check, e.g. SPARKFLEET-1F0A9C3E."""
    return EXACT_PREFIX + secrets.token_hex(4).upper()


def exact_prompt(token):
    """Return the exact-string prompt for ``token``."""
    return EXACT_PROMPT.format(token=token)


def chat_payload(model, prompt, max_tokens, chat_template_kwargs=None, stream=False):
    """Build a greedy single-message chat completion request body."""
    payload = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "temperature": 0,
        "max_tokens": max_tokens,
    }
    if chat_template_kwargs:
        payload["chat_template_kwargs"] = dict(chat_template_kwargs)
    if stream:
        payload["stream"] = True
        payload["stream_options"] = {"include_usage": True}
    return payload


def excerpt(text, secret=None, limit=EXCERPT_CHARS):
    """Return at most ``limit`` characters of ``text`` with ``secret`` masked."""
    if text is None:
        return ""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    text = str(text)
    if secret:
        text = text.replace(secret, "********")
    if len(text) > limit:
        return text[: limit - 3] + "..."
    return text


def model_ids(document):
    """Return the ``data[].id`` values of a /v1/models answer."""
    if not isinstance(document, dict) or not isinstance(document.get("data"), list):
        raise ValueError("no data list in the /v1/models answer")
    return [str(item["id"]) for item in document["data"] if isinstance(item, dict) and "id" in item]


def chat_answer(document):
    """Return (content, reasoning, finish_reason, completion_tokens) of a chat completion."""
    if not isinstance(document, dict):
        raise ValueError("chat completion answer is not a JSON object")
    choices = document.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ValueError("no choices in the chat completion answer")
    message = choices[0].get("message") or {}
    usage = document.get("usage") or {}
    return (
        message.get("content") or "",
        message.get("reasoning_content") or "",
        choices[0].get("finish_reason"),
        usage.get("completion_tokens"),
    )


def exact_matches(content, token):
    """True when the answer is the token and nothing else (surrounding whitespace aside)."""
    return (content or "").strip() == token


def math_matches(content):
    """True when the answer contains 323 as a whole number."""
    return bool(_MATH_RE.search(content or ""))


def _delta_text(chunk):
    """Return the generated text a streamed chunk carries (answer or reasoning)."""
    text = ""
    for choice in chunk.get("choices") or []:
        if isinstance(choice, dict) and isinstance(choice.get("delta"), dict):
            delta = choice["delta"]
            text += (delta.get("content") or "") + (delta.get("reasoning_content") or "")
    return text


def decode_rate(events, started=None):
    """Measure one streamed run: decode tokens/s, excluding the time to the first token.

    ``events`` is a list of (arrival time, parsed chunk). The rate is
    (completion_tokens - 1) / (last token time - first token time), with
    completion_tokens from the usage chunk, or the number of chunks carrying
    text when the server sent no usage.
    """
    token_times = []
    usage_tokens = None
    finish_reason = None
    for stamp, chunk in events:
        if not isinstance(chunk, dict):
            continue
        usage = chunk.get("usage")
        if isinstance(usage, dict) and usage.get("completion_tokens") is not None:
            usage_tokens = int(usage["completion_tokens"])
        for choice in chunk.get("choices") or []:
            if isinstance(choice, dict) and choice.get("finish_reason"):
                finish_reason = choice["finish_reason"]
        if _delta_text(chunk):
            token_times.append(stamp)
    chunks = len(token_times)
    tokens = usage_tokens if usage_tokens is not None else chunks
    run = {
        "tokens_per_s": None,
        "completion_tokens": tokens,
        "chunks": chunks,
        "usage_reported": usage_tokens is not None,
        "finish_reason": finish_reason,
        "decode_s": None,
        "ttft_s": None,
    }
    if token_times and started is not None:
        run["ttft_s"] = round(token_times[0] - started, 4)
    if chunks >= 2:
        run["decode_s"] = round(token_times[-1] - token_times[0], 4)
        span = token_times[-1] - token_times[0]
        if tokens >= 2 and span > 0:
            run["tokens_per_s"] = round((tokens - 1) / span, 2)
    return run


def median_rate(runs):
    """Median tokens/s over the runs that produced a rate, or None."""
    rates = [run["tokens_per_s"] for run in runs if run.get("tokens_per_s") is not None]
    if not rates:
        return None
    return round(statistics.median(rates), 2)


def metric_sums(text, names):
    """{name: sum over all its series} of the named metrics in a Prometheus text exposition.

    A metric with several series (one per model, TP rank or label set) is summed; a
    name that does not appear is left out; a value that is not a number is skipped.
    """
    sums = {}
    for line in text.splitlines():
        match = _SAMPLE_RE.match(line.strip())
        if not match or match.group(1) not in names:
            continue
        try:
            value = float(match.group(3))
        except ValueError:
            continue
        if not math.isnan(value):  # NaN is no reading
            sums[match.group(1)] = sums.get(match.group(1), 0.0) + value
    return sums


def progress(client, timeout=None):
    """The server's decode progress from its /metrics, or None when it cannot be read.

    {"running": requests being decoded, "tokens": tokens generated so far}. None: the
    server does not answer /metrics with 200 (metrics off) or lacks either metric.
    """
    try:
        answer = client.request("GET", METRICS_PATH, timeout=timeout)
    except TransportError:
        return None
    if answer.status != 200:
        return None
    sums = metric_sums(
        answer.body.decode("utf-8", "replace"), (RUNNING_REQS_METRIC, GENERATION_TOKENS_METRIC)
    )
    if len(sums) < 2:
        return None
    return {"running": sums[RUNNING_REQS_METRIC], "tokens": sums[GENERATION_TOKENS_METRIC]}


def describe_transport_error(exc, timeout=None):
    """Turn a socket/http.client exception into a short reason."""
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return f"timed out after {timeout}s" if timeout is not None else "timed out"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, http.client.RemoteDisconnected):
        return "server closed the connection without answering"
    if isinstance(exc, ConnectionResetError):
        return "connection reset by the server"
    return f"{type(exc).__name__}: {exc}"


class HttpAnswer:
    """Status, body and (for streams) timed chunks of one HTTP exchange."""

    def __init__(self, status, body=b"", events=None, started=None, complete=True):
        self.status = status
        self.body = body
        self.events = events if events is not None else []
        self.started = started
        self.complete = complete

    def json(self):
        return json.loads(self.body.decode("utf-8"))


class SGLangClient:
    """Minimal client for the SGLang HTTP API (stdlib only, no proxies)."""

    def __init__(self, url, api_key=None, request_timeout=120, clock=time.monotonic):
        self.scheme, self.host, self.port, self.prefix = parse_base_url(url)
        self.url = url.rstrip("/")
        self.api_key = api_key
        self.request_timeout = request_timeout
        self.clock = clock

    def _connect(self, timeout):
        if self.scheme == "https":
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def _headers(self, has_body):
        headers = {"Accept": "application/json", "User-Agent": "sparkfleet-sglang-health"}
        if has_body:
            headers["Content-Type"] = "application/json"
        if self.api_key:
            headers["Authorization"] = "Bearer " + self.api_key
        return headers

    def request(self, method, path, payload=None, timeout=None, stream=False):
        """Send one request; return an HttpAnswer or raise TransportError."""
        timeout = self.request_timeout if timeout is None else timeout
        body = None if payload is None else json.dumps(payload).encode("utf-8")
        conn = self._connect(timeout)
        started = self.clock()
        try:
            conn.request(method, self.prefix + path, body=body, headers=self._headers(body))
            response = conn.getresponse()
            if stream and response.status == 200:
                events, complete = self._read_stream(response)
                return HttpAnswer(200, events=events, started=started, complete=complete)
            return HttpAnswer(response.status, body=response.read(), started=started)
        except (OSError, http.client.HTTPException) as exc:
            raise TransportError(describe_transport_error(exc, timeout)) from None
        finally:
            conn.close()

    def _read_stream(self, response):
        """Read server-sent events; stamp each parsed chunk with its arrival time."""
        events = []
        while True:
            line = response.readline()
            if not line:
                return events, False
            stamp = self.clock()
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                return events, True
            try:
                chunk = json.loads(data.decode("utf-8"))
            except ValueError:
                raise TransportError(
                    "unparseable stream chunk: " + excerpt(data, self.api_key)
                ) from None
            if isinstance(chunk, dict) and chunk.get("error"):
                raise TransportError(
                    "error in stream: " + excerpt(json.dumps(chunk["error"]), self.api_key)
                )
            events.append((stamp, chunk))


class _CheckFailed(Exception):
    """A check failed; ``fatal`` stops the checks after it (server unreachable, 401)."""

    def __init__(self, detail, fatal=False):
        super().__init__(detail)
        self.detail = detail
        self.fatal = fatal


class HealthRunner:
    """Run the requested checks in order and collect one evidence dict per check."""

    def __init__(
        self,
        client,
        served_model_name=None,
        timeout=900,
        poll_interval=5,
        decode_runs=3,
        decode_max_tokens=256,
        short_max_tokens=8,
        chat_template_kwargs=None,
        exact_token=None,
        sleep=time.sleep,
        alive=None,
        poll_request_timeout=None,
    ):
        self.client = client
        self.model = served_model_name
        self.timeout = timeout
        self.poll_interval = poll_interval
        self.decode_runs = decode_runs
        self.decode_max_tokens = decode_max_tokens
        self.short_max_tokens = short_max_tokens
        self.chat_template_kwargs = chat_template_kwargs
        self.exact_token = exact_token or make_exact_token()
        self.sleep = sleep
        self.clock = client.clock
        # Called between two health polls: (False, why) when the engine has exited,
        # which ends the wait at once instead of at the timeout.
        self.alive = alive
        # Socket timeout of one health poll (default: the client's request_timeout).
        self.poll_request_timeout = poll_request_timeout

    @contextlib.contextmanager
    def settings(self, **values):
        """Set these attributes (``timeout``, ``decode_runs``...) for a block, then restore them."""
        saved = {name: getattr(self, name) for name in values}
        for name, value in values.items():
            setattr(self, name, value)
        try:
            yield self
        finally:
            for name, value in saved.items():
                setattr(self, name, value)

    # -- helpers ---------------------------------------------------------

    def _excerpt(self, text):
        return excerpt(text, self.client.api_key)

    def _got(self, content, reasoning):
        """Quote an answer; point at thinking when only reasoning_content came back."""
        got = repr(self._excerpt(content.strip()))
        if not content.strip() and reasoning.strip():
            got += (
                " (text only in reasoning_content: does chat_template_kwargs turn thinking off?"
                f" {self._excerpt(reasoning.strip())[:80]!r})"
            )
        return got

    def _call(self, evidence, method, path, payload=None, stream=False, timeout=None):
        """One request whose failure to get an HTTP 200 fails the check."""
        try:
            answer = self.client.request(method, path, payload, timeout=timeout, stream=stream)
        except TransportError as exc:
            evidence["status"] = None
            raise _CheckFailed(f"{method} {path} failed: {exc}", fatal=True) from None
        evidence["status"] = answer.status
        if answer.status == 401:
            raise _CheckFailed(f"HTTP 401 from {path}: {API_KEY_HINT}", fatal=True)
        if answer.status != 200:
            evidence["excerpt"] = self._excerpt(answer.body)
            raise _CheckFailed(
                f"HTTP {answer.status} from {path}: {self._excerpt(answer.body) or '(empty body)'}"
            )
        return answer

    def _json(self, evidence, answer, path):
        try:
            return answer.json()
        except ValueError:
            evidence["excerpt"] = self._excerpt(answer.body)
            raise _CheckFailed(
                f"invalid JSON from {path} (HTTP {answer.status}): {evidence['excerpt']}"
            ) from None

    def _chat(self, evidence, prompt, max_tokens):
        payload = chat_payload(self.model, prompt, max_tokens, self.chat_template_kwargs)
        answer = self._call(evidence, "POST", CHAT_PATH, payload)
        document = self._json(evidence, answer, CHAT_PATH)
        try:
            content, reasoning, finish, tokens = chat_answer(document)
        except ValueError as exc:
            evidence["excerpt"] = self._excerpt(answer.body)
            raise _CheckFailed(f"{exc} (HTTP 200): {evidence['excerpt']}") from None
        evidence.update(
            {
                "excerpt": self._excerpt(content or reasoning),
                "finish_reason": finish,
                "completion_tokens": tokens,
            }
        )
        return content, reasoning

    # -- checks ----------------------------------------------------------

    def check_health(self, evidence):
        started = self.clock()
        deadline = started + self.timeout
        attempts = 0
        reason = "no attempt"
        evidence.update({"attempts": 0, "waited_s": 0.0, "status": None})
        while True:
            attempts += 1
            remaining = deadline - self.clock()
            per_try = max(
                1, min(self.poll_request_timeout or self.client.request_timeout, int(remaining) + 1)
            )
            try:
                answer = self.client.request("GET", HEALTH_PATH, timeout=per_try)
                evidence["status"] = answer.status
                if answer.status == 200:
                    reason = None
                elif answer.status == 401:
                    reason = f"HTTP 401 from {HEALTH_PATH}: {API_KEY_HINT}"
                elif answer.status < 500:
                    reason = f"HTTP {answer.status}: {self._excerpt(answer.body) or '(empty body)'}"
                else:
                    reason = f"HTTP {answer.status}"
                    answer = None
            except TransportError as exc:
                evidence["status"] = None
                reason = str(exc)
                answer = None
            evidence["attempts"] = attempts
            evidence["waited_s"] = round(self.clock() - started, 2)
            if answer is not None:
                break  # 200, or a 4xx that waiting will not fix
            if self.alive is not None:
                alive, why = self.alive()
                if not alive:
                    evidence["error"] = f"the engine exited before it answered ({why})"
                    raise _CheckFailed(evidence["error"], fatal=True)
            remaining = deadline - self.clock()
            if remaining <= 0:
                break
            self.sleep(min(self.poll_interval, remaining))
        if reason is None:
            return
        evidence["error"] = reason
        if evidence["status"] is not None and evidence["status"] < 500:
            raise _CheckFailed(reason, fatal=True)
        raise _CheckFailed(
            f"no HTTP 200 from {HEALTH_PATH} after {evidence['waited_s']}s "
            f"({attempts} attempts); last: {reason}",
            fatal=True,
        )

    def check_models(self, evidence):
        answer = self._call(evidence, "GET", MODELS_PATH)
        document = self._json(evidence, answer, MODELS_PATH)
        try:
            ids = model_ids(document)
        except ValueError as exc:
            evidence["excerpt"] = self._excerpt(answer.body)
            raise _CheckFailed(f"{exc}: {evidence['excerpt']}") from None
        evidence["model_ids"] = ids
        evidence["expected"] = self.model
        if self.model is None:
            if not ids:
                raise _CheckFailed(f"no model served (HTTP {answer.status})")
        elif self.model not in ids:
            raise _CheckFailed(
                f"expected {self.model!r} among the served models, found {ids} "
                f"(HTTP {answer.status})"
            )

    def check_exact(self, evidence):
        evidence["expected"] = self.exact_token
        content, reasoning = self._chat(evidence, exact_prompt(self.exact_token), ANSWER_MAX_TOKENS)
        if not exact_matches(content, self.exact_token):
            raise _CheckFailed(
                f"expected {self.exact_token!r}, got {self._got(content, reasoning)} "
                f"(HTTP {evidence['status']})"
            )

    def check_math(self, evidence):
        evidence["expected"] = MATH_ANSWER
        content, reasoning = self._chat(evidence, MATH_PROMPT, ANSWER_MAX_TOKENS)
        if not math_matches(content):
            raise _CheckFailed(
                f"expected {MATH_ANSWER}, got {self._got(content, reasoning)} "
                f"(HTTP {evidence['status']})"
            )

    def check_short_max_tokens(self, evidence):
        evidence["max_tokens"] = self.short_max_tokens
        content, reasoning = self._chat(evidence, SHORT_PROMPT, self.short_max_tokens)
        tokens = evidence.get("completion_tokens")
        evidence["clamp_observed"] = bool(tokens and tokens > self.short_max_tokens)
        if not (content or reasoning).strip():
            raise _CheckFailed(
                f"max_tokens={self.short_max_tokens} answered HTTP {evidence['status']} with no "
                f"text (finish_reason {evidence.get('finish_reason')!r})"
            )

    def check_decode(self, evidence):
        payload = chat_payload(
            self.model, DECODE_PROMPT, self.decode_max_tokens, self.chat_template_kwargs, True
        )
        runs = []
        evidence.update({"runs": runs, "max_tokens": self.decode_max_tokens})
        problems = []
        try:
            for index in range(1, self.decode_runs + 1):
                answer = self._call(evidence, "POST", CHAT_PATH, payload, stream=True)
                run = decode_rate(answer.events, answer.started)
                run["complete"] = answer.complete
                runs.append(run)
                if not answer.complete:
                    problems.append(f"run {index}: stream ended before [DONE]")
                elif run["tokens_per_s"] is None:
                    problems.append(
                        f"run {index}: no decode rate ({run['chunks']} text chunks, "
                        f"{run['completion_tokens']} tokens)"
                    )
        finally:
            evidence["tokens_per_s"] = median_rate(runs)
            evidence["usage_reported"] = bool(runs) and all(r["usage_reported"] for r in runs)
        if problems:
            raise _CheckFailed("; ".join(problems) + f" (HTTP {evidence['status']})")

    # -- driver ----------------------------------------------------------

    def run_check(self, name):
        """Run one check; return (evidence, fatal). Never raises for a failed check.

        ``evidence`` has ``passed``, ``status``, ``detail``, ``elapsed_s`` and what the
        check collected; ``fatal`` says the checks after it cannot run (no answer, 401).
        """
        evidence = {"passed": False, "status": None}
        fatal = False
        started = self.clock()
        try:
            getattr(self, "check_" + name)(evidence)
        except _CheckFailed as exc:
            evidence["detail"] = exc.detail
            fatal = exc.fatal
        else:
            evidence["passed"] = True
            evidence.setdefault("detail", "ok")
        evidence["elapsed_s"] = round(self.clock() - started, 3)
        return evidence, fatal

    def run(self, checks):
        """Run ``checks`` in order; return the report dict the module hands back."""
        results = {}
        failed = []
        skipped = []
        stop_reason = None
        for name in normalize_checks(checks):
            if stop_reason:
                results[name] = {
                    "passed": False,
                    "skipped": True,
                    "elapsed_s": 0.0,
                    "status": None,
                    "detail": "not run: " + stop_reason,
                }
                skipped.append(name)
                continue
            evidence, fatal = self.run_check(name)
            if not evidence["passed"]:
                failed.append(name)
                if fatal:
                    stop_reason = f"{name} failed"
            results[name] = evidence
        decode = results.get("decode") or {}
        report = {
            "checks": results,
            "decode_tokens_per_s": decode.get("tokens_per_s"),
            "passed": not failed,
            "failed": failed,
            "msg": "",
        }
        report["msg"] = failure_message(self.client.url, results, failed, skipped)
        return report


def failure_message(url, results, failed, skipped=()):
    """One message naming each failed check, the URL and the evidence ('' when all passed)."""
    if not failed:
        return ""
    parts = [f"{name}: {results[name]['detail']}" for name in failed]
    message = "SGLang at {} failed {}: {}".format(url, ", ".join(failed), "; ".join(parts))
    if skipped:
        message += " (not run: {})".format(", ".join(skipped))
    return message


# -- the modules' side -----------------------------------------------------------


def argument_spec(first=None, then=None, **changes):
    """The AnsibleModule options of a module that runs these checks, in this order.

    ``url``, ``api_key`` and ``served_model_name``; the module's ``first`` options; the
    runner's settings with the runner's defaults (``poll_interval``, ``request_timeout``,
    ``short_max_tokens``, ``decode_runs``, ``decode_max_tokens``); the module's ``then``
    options; ``chat_template_kwargs``. ``changes`` ({option: {key: value}}) amend a shared
    option, e.g. ``poll_interval={"default": 2}``.
    """
    spec = dict(
        url=dict(type="str", required=True),
        api_key=dict(type="str", no_log=True),
        served_model_name=dict(type="str"),
        **(first or {}),
        poll_interval=dict(type="int", default=5),
        request_timeout=dict(type="int", default=120),
        short_max_tokens=dict(type="int", default=8, no_log=False),
        decode_runs=dict(type="int", default=3),
        decode_max_tokens=dict(type="int", default=256, no_log=False),
        **(then or {}),
        chat_template_kwargs=dict(type="dict", default={"enable_thinking": False}),
    )
    for name, keys in changes.items():
        spec[name].update(keys)
    return spec


def runner_from_params(params, **settings):
    """The HealthRunner, on its SGLangClient, that ``argument_spec`` parameters ask for.

    ``settings`` are further HealthRunner arguments (``timeout``, ``decode_runs``...).
    """
    client = SGLangClient(
        params["url"], api_key=params["api_key"], request_timeout=params["request_timeout"]
    )
    return HealthRunner(
        client,
        served_model_name=params["served_model_name"],
        decode_max_tokens=params["decode_max_tokens"],
        short_max_tokens=params["short_max_tokens"],
        chat_template_kwargs=params["chat_template_kwargs"],
        **settings,
    )
