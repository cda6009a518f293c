"""Steady client of playbooks/drill.yml: a fixed number of requests in flight while drilling.

Run on the head (rank 0) with its own Python; the HTTP client is the collection's
(_health.SGLangClient, installed beside the cluster control program): the same requests,
API key header and timeouts as the health checks. Each answered or failed request is one
JSON line in --out ({"w", "t0", "t1", "ok", "status", "error"}, epoch seconds), written as it
ends, so a run killed half-way still leaves what it saw. Ends when --stop-file appears or
after --max-s.

Not llama-benchy (the bench's client): that runs a fixed set of requests and reports figures
at the end, where a drill needs every request's outcome and time as it happens.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time

PROMPT = "Count from one to twenty in words, separated by commas."


def worker(index, client, health, args, stop, out, lock):
    payload = health.chat_payload(args.model, PROMPT, args.max_tokens)
    while not stop():
        t0 = time.time()
        status, error, ok = None, "", False
        try:
            answer = client.request("POST", health.CHAT_PATH, payload)
            status = answer.status
            if status == 200:
                content, reasoning, _finish, _tokens = health.chat_answer(answer.json())
                ok = bool(content or reasoning)
                error = "" if ok else "empty answer"
            else:
                error = f"HTTP {status}"
        except (health.TransportError, ValueError) as exc:
            error = str(exc)[:200]
        t1 = time.time()
        line = json.dumps(
            {
                "w": index,
                "t0": round(t0, 3),
                "t1": round(t1, 3),
                "ok": ok,
                "status": status,
                "error": error,
            }
        )
        with lock:
            out.write(line + "\n")
            out.flush()
        if not ok:
            # A server that is down refuses at once: retry at a steady pace, not in a hot loop.
            time.sleep(max(0.0, args.retry_s - (t1 - t0)))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--url", required=True, help="the head's API base URL")
    parser.add_argument("--model", required=True)
    parser.add_argument("--api-key-file", default="")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--retry-s", type=float, default=0.5)
    parser.add_argument("--out", required=True)
    parser.add_argument("--stop-file", required=True)
    parser.add_argument("--max-s", type=float, default=7200.0)
    parser.add_argument("--lib", default="/usr/local/lib/sparkfleet")
    args = parser.parse_args(argv)
    sys.path.insert(0, args.lib)
    import _health as health

    api_key = None
    if args.api_key_file and os.path.exists(args.api_key_file):
        with open(args.api_key_file, encoding="utf-8") as fh:
            api_key = fh.read().strip() or None
    client = health.SGLangClient(args.url, api_key=api_key, request_timeout=args.timeout)
    deadline = time.time() + args.max_s

    def stop():
        return os.path.exists(args.stop_file) or time.time() > deadline

    lock = threading.Lock()
    with open(args.out, "a", encoding="utf-8") as out:
        threads = [
            threading.Thread(
                target=worker, args=(i, client, health, args, stop, out, lock), daemon=True
            )
            for i in range(args.concurrency)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    return 0


if __name__ == "__main__":
    sys.exit(main())
