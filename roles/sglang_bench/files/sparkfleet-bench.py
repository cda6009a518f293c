"""Engine benchmark, run on the head against its own OpenAI-compatible API.

The measuring is llama-benchy's (``llama_benchy.client.LLMClient.run_generation``:
the streamed chat request, the chunk timestamps, the token count from token ids,
stream usage or chunks, reasoning tokens included). This driver only feeds it the
collection's fixed prompt set per content type, runs the seed's two measurements
and reduces them:

- single stream, greedy: each prompt alone; decode tok/s of one request is
  llama-benchy's ``tg`` figure (tokens after the first / time from first to last
  token), so time to first token is excluded; the median per content type and
  over all prompts;
- concurrency C: C prompts at once, repeated ``--rounds`` times; aggregate tok/s of
  a round is llama-benchy's batch ``tg`` throughput (decode tokens of every request
  / time from the first first-token to the last token); median, min, max;
- TTFT and inter-token latency percentiles of every group.

Exit 0 with the JSON on --output, exit 1 naming the failed requests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import time

import numpy as np

PERCENTILES = (50, 90, 99)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    p.add_argument("--base-url", required=True, help="OpenAI-compatible base URL, ending in /v1")
    p.add_argument("--model", required=True, help="served model name")
    p.add_argument("--api-key-file", help="file holding the API key (empty file: no key)")
    p.add_argument("--prompts", required=True, help="JSON: {content_type: [prompt, ...]}")
    p.add_argument("--types", default="code,reasoning,math,prose")
    p.add_argument(
        "--per-type", type=int, default=5, help="prompts per content type (single stream)"
    )
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--concurrency", default="4,8,16")
    p.add_argument("--rounds", type=int, default=3, help="rounds per concurrency level")
    p.add_argument("--seed", type=int, default=14)
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per request")
    p.add_argument("--output", required=True)
    return p.parse_args(argv)


def pct(values):
    if not values:
        return None
    return {f"p{q}": round(float(np.percentile(values, q)), 3) for q in PERCENTILES}


def spread(values):
    return {
        "median": round(statistics.median(values), 2),
        "min": round(min(values), 2),
        "max": round(max(values), 2),
        "n": len(values),
    }


def decode_tokens(res):
    """Tokens observed after the first token's timestamp (llama-benchy's tg count)."""
    ts = res.token_timestamps
    return sum(1 for t in ts if t > ts[0]) if len(ts) > 1 else 0


def request_figures(res, chunk_times=None):
    """One request's figures. ITL is the gap between content chunks as they arrived
    (as sglang.bench_serving reports it); llama-benchy's token timestamps are spread
    evenly when the server sends no token ids, so they cannot give ITL."""
    ts = res.token_timestamps
    ttft = (res.first_token_ts - res.start_ts) * 1000.0 if res.first_token_ts else None
    n = decode_tokens(res)
    span = ts[-1] - ts[0] if len(ts) > 1 else 0.0
    chunks = ts if chunk_times is None else chunk_times
    return {
        "tokens": res.total_tokens,
        "decode_tokens": n,
        "decode_tok_s": round(n / span, 3) if n and span > 0 else None,
        "ttft_ms": round(ttft, 3) if ttft is not None else None,
        "itl_ms": [round((b - a) * 1000.0, 3) for a, b in zip(chunks, chunks[1:])],
    }


class ChunkClock:
    """llama-benchy's progress hooks, used only to note when each content chunk came."""

    def __init__(self):
        self.times = {}

    def tokens(self, *, request_id, count, snippet="", estimated=False):
        self.times.setdefault(request_id, []).append(time.perf_counter())

    def request_first_response(self, **kwargs):
        pass

    def request_first_token(self, **kwargs):
        pass

    def request_end(self, **kwargs):
        pass


def read_key(path):
    if not path:
        return ""
    with open(path, encoding="utf-8") as handle:
        return handle.read().strip()


class Bench:
    def __init__(self, args, prompts):
        from llama_benchy.client import LLMClient

        self.args = args
        self.prompts = prompts
        self.client = LLMClient(
            args.base_url,
            read_key(args.api_key_file) or "EMPTY",
            args.model,
            extra_body={"temperature": args.temperature},
        )
        self.failures = []
        self.clock = ChunkClock()
        self.next_id = 0

    async def one(self, session, prompt, label):
        self.next_id += 1
        rid = self.next_id
        res = await self.client.run_generation(
            session,
            "",
            prompt,
            self.args.max_tokens,
            no_cache=False,
            progress=self.clock,
            request_id=rid,
        )
        if res.error or not res.token_timestamps:
            self.failures.append(f"{label}: {res.error or 'no tokens streamed'}")
            return None
        res.chunk_times = self.clock.times.pop(rid, None)
        return res

    async def run(self):
        import aiohttp

        args = self.args
        rng = random.Random(args.seed)
        types = [t for t in args.types.split(",") if t]
        missing = [t for t in types if len(self.prompts.get(t, [])) < 1]
        if missing:
            raise SystemExit(
                f"no prompts for content type(s) {', '.join(missing)} in {args.prompts}"
            )
        timeout = aiohttp.ClientTimeout(total=args.timeout)
        out = {"single_stream": {}, "concurrency": {}}
        async with aiohttp.ClientSession(timeout=timeout) as session:
            # One request first: the engine's first request pays for lazy set-up.
            await self.one(session, self.prompts[types[0]][0], "warm-up")
            self.failures.clear()
            all_decode = []
            for ctype in types:
                pool = self.prompts[ctype]
                chosen = rng.sample(pool, min(args.per_type, len(pool)))
                per_req = []
                for i, prompt in enumerate(chosen):
                    res = await self.one(session, prompt, f"{ctype} prompt {i}")
                    if res is not None:
                        per_req.append(request_figures(res, res.chunk_times))
                speeds = [r["decode_tok_s"] for r in per_req if r["decode_tok_s"]]
                all_decode += speeds
                out["single_stream"][ctype] = {
                    "prompts": len(chosen),
                    "decode_tok_s": spread(speeds) if speeds else None,
                    "ttft_ms": pct([r["ttft_ms"] for r in per_req if r["ttft_ms"] is not None]),
                    "itl_ms": pct([x for r in per_req for x in r["itl_ms"]]),
                    "requests": [{k: v for k, v in r.items() if k != "itl_ms"} for r in per_req],
                }
            out["single_stream_median_decode_tok_s"] = (
                round(statistics.median(all_decode), 2) if all_decode else None
            )
            mixed = [p for t in types for p in self.prompts[t]]
            for level in [int(c) for c in args.concurrency.split(",") if c]:
                rounds = []
                for r in range(args.rounds):
                    batch = [rng.choice(mixed) for _n in range(level)]
                    results = await asyncio.gather(
                        *(
                            self.one(session, p, f"c{level} round {r} request {i}")
                            for i, p in enumerate(batch)
                        )
                    )
                    ok = [x for x in results if x is not None]
                    if not ok:
                        continue
                    first = min(x.token_timestamps[0] for x in ok)
                    last = max(x.token_timestamps[-1] for x in ok)
                    tokens = sum(decode_tokens(x) for x in ok)
                    figs = [request_figures(x, x.chunk_times) for x in ok]
                    rounds.append(
                        {
                            "requests": len(ok),
                            "aggregate_tok_s": round(tokens / (last - first), 3)
                            if last > first
                            else None,
                            "ttft_ms": [f["ttft_ms"] for f in figs if f["ttft_ms"] is not None],
                            "itl_ms": [x for f in figs for x in f["itl_ms"]],
                            "per_request_decode_tok_s": [
                                f["decode_tok_s"] for f in figs if f["decode_tok_s"]
                            ],
                        }
                    )
                agg = [r["aggregate_tok_s"] for r in rounds if r["aggregate_tok_s"]]
                out["concurrency"][str(level)] = {
                    "rounds": len(rounds),
                    "aggregate_tok_s": spread(agg) if agg else None,
                    "per_request_decode_tok_s": spread(
                        [x for r in rounds for x in r["per_request_decode_tok_s"]] or [0.0]
                    ),
                    "ttft_ms": pct([x for r in rounds for x in r["ttft_ms"]]),
                    "itl_ms": pct([x for r in rounds for x in r["itl_ms"]]),
                }
        return out


def main(argv=None):
    from llama_benchy import __version__ as llama_benchy_version

    args = parse_args(argv)
    with open(args.prompts, encoding="utf-8") as handle:
        prompts = json.load(handle)
    bench = Bench(args, prompts)
    started = time.time()
    figures = asyncio.run(bench.run())
    report = {
        "tool": {
            "name": "llama-benchy",
            "version": llama_benchy_version,
            "driver": "sparkfleet-bench",
        },
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "duration_s": round(time.time() - started, 2),
        "settings": {
            "base_url": args.base_url,
            "model": args.model,
            "types": args.types.split(","),
            "per_type": args.per_type,
            "max_tokens": args.max_tokens,
            "temperature": args.temperature,
            "concurrency": [int(c) for c in args.concurrency.split(",") if c],
            "rounds": args.rounds,
            "seed": args.seed,
        },
        "failures": bench.failures,
        **figures,
    }
    tmp = args.output + ".partial"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(report, handle, indent=2)
        handle.write("\n")
    os.replace(tmp, args.output)
    if bench.failures:
        print(
            f"{len(bench.failures)} request(s) failed: " + "; ".join(bench.failures[:5]),
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
