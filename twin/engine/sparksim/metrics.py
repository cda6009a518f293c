"""The stand-in's /metrics: SGLang's own metric names, types and buckets, from what the
API sees of each request (no prometheus_client in the image: the text format is small).

Names and kinds as upstream's collectors export them (scheduler gauges, tokenizer-manager
counters and histograms), labelled with ``model_name``.
"""

from __future__ import annotations

import time

# Bucket edges like upstream's collectors', in seconds.
TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0,
                80.0, 120.0, 160.0)  # fmt: skip
ITL_BUCKETS = (0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035,
               0.040, 0.060, 0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1.0, 2.0, 4.0, 6.0,
               8.0)  # fmt: skip
E2E_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0,
               100.0, 150.0, 200.0, 250.0, 300.0, 350.0, 500.0, 1000.0)  # fmt: skip
# gen_throughput: tokens over the last few seconds, as the scheduler's log interval averages.
THROUGHPUT_WINDOW_S = 5.0


class Histogram:
    def __init__(self, buckets):
        self.buckets = buckets
        self.counts = [0] * len(buckets)
        self.sum = 0.0
        self.count = 0

    def observe(self, value):
        self.sum += value
        self.count += 1
        for i, edge in enumerate(self.buckets):
            if value <= edge:
                self.counts[i] += 1

    def lines(self, name, labels):
        out = []
        for edge, count in zip(self.buckets, self.counts):
            out.append(f'{name}_bucket{{{labels},le="{edge}"}} {count}')
        out.append(f'{name}_bucket{{{labels},le="+Inf"}} {self.count}')
        out.append(f"{name}_sum{{{labels}}} {self.sum}")
        out.append(f"{name}_count{{{labels}}} {self.count}")
        return out


class Metrics:
    """What one rank-0 API process has served, in SGLang's metric names."""

    def __init__(self, model_name, capacity_tokens):
        self.labels = f'model_name="{model_name}"'
        self.capacity = max(1, int(capacity_tokens))
        self.requests = 0
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.running = {}  # rid -> [started, last token time, tokens in flight]
        self.recent = []  # token times within THROUGHPUT_WINDOW_S
        self.ttft = Histogram(TTFT_BUCKETS)
        self.itl = Histogram(ITL_BUCKETS)
        self.e2e = Histogram(E2E_BUCKETS)

    def started(self, rid, n_prompt, now=None):
        self.requests += 1
        self.prompt_tokens += n_prompt
        self.running[rid] = [now or time.time(), None, n_prompt]

    def token(self, rid, now=None):
        now = now or time.time()
        self.generation_tokens += 1
        self.recent.append(now)
        entry = self.running.get(rid)
        if entry is None:
            return
        started, last, _ = entry
        if last is None:
            self.ttft.observe(now - started)
        else:
            self.itl.observe(now - last)
        entry[1] = now
        entry[2] += 1

    def finished(self, rid, now=None):
        entry = self.running.pop(rid, None)
        if entry is not None:
            self.e2e.observe((now or time.time()) - entry[0])

    @property
    def num_running(self):
        return len(self.running)

    def text(self, now=None):
        now = now or time.time()
        self.recent = [t for t in self.recent if now - t <= THROUGHPUT_WINDOW_S]
        in_flight = sum(entry[2] for entry in self.running.values())
        lab = self.labels
        families = (
            ("sglang:num_running_reqs", "gauge", len(self.running)),
            ("sglang:num_queue_reqs", "gauge", 0),
            ("sglang:token_usage", "gauge", round(min(1.0, in_flight / self.capacity), 4)),
            ("sglang:gen_throughput", "gauge", round(len(self.recent) / THROUGHPUT_WINDOW_S, 3)),
            ("sglang:cache_hit_rate", "gauge", 0.0),
            ("sglang:num_requests_total", "counter", self.requests),
            ("sglang:prompt_tokens_total", "counter", self.prompt_tokens),
            ("sglang:generation_tokens_total", "counter", self.generation_tokens),
        )
        lines = []
        for name, kind, value in families:
            lines += [f"# TYPE {name} {kind}", f"{name}{{{lab}}} {value}"]
        for name, hist in (
            ("sglang:time_to_first_token_seconds", self.ttft),
            ("sglang:inter_token_latency_seconds", self.itl),
            ("sglang:e2e_request_latency_seconds", self.e2e),
        ):
            lines.append(f"# TYPE {name} histogram")
            lines += hist.lines(name, lab)
        return "\n".join(lines) + "\n"
