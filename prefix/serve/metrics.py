"""Prometheus metrics of the prefix engine, in its own registry (one per server app).

Counters fed from ``RequestOutput`` (``observe`` is the ``AsyncEngine.on_output``
hook, called in the engine thread):

- ``prefix_cache_queries_total`` / ``prefix_cache_hits_total``: prompt tokens
  looked up vs prompt tokens reused, in *tokens*, counted once per request when
  it finishes (a request aborted before its first token never queried the cache
  in a way that completed, so it is not counted); a request that keeps no KV
  (``cache_kv`` off: a namespace of its own) counts as looked up with no hit here,
  while the block-level ``prefix_cache_block_queries_total`` below skips it, as it
  does every request when prefix caching is off;
- ``prefix_requests_total{finish_reason}`` (``error``: its engine step failed),
  ``prefix_prompt_tokens_total``, ``prefix_generation_tokens_total``;
- histograms ``prefix_time_to_first_token_seconds`` (engine arrival → first
  token) and ``prefix_time_per_output_token_seconds`` (per request: time from
  the first to the last token over the tokens after the first).

Read from the engine at scrape time (a custom collector, no lock taken):
``prefix_cache_blocks_{free,cached,used}``, ``prefix_num_requests_{running,waiting}``,
``prefix_cache_evictions_total``, ``prefix_preemptions_total``, the block-level
``prefix_cache_block_{queries,hits}_total`` and ``prefix_engine_step_failures_total``
(steps that raised; prefix/serve/recovery.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from prefix.serve.engine import PrefixEngine, RequestOutput

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

TTFT_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0)
TPOT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0, 2.5, 5.0)


class _EngineCollector(Collector):
    """Pool and scheduler state, read when Prometheus scrapes."""

    def __init__(self, engine: PrefixEngine) -> None:
        self.engine = engine

    def collect(self) -> Iterator[Metric]:
        engine, pool, sched = self.engine, self.engine.pool, self.engine.scheduler
        for name, doc, value in (
            (
                "prefix_cache_blocks_free",
                "KV blocks with ref count 0 (cached or not)",
                pool.num_free_blocks,
            ),
            (
                "prefix_cache_blocks_cached",
                "KV blocks holding a key (findable)",
                pool.num_cached_blocks,
            ),
            (
                "prefix_cache_blocks_used",
                "KV blocks referenced by a running request",
                pool.num_used_blocks,
            ),
            ("prefix_cache_blocks_total", "KV blocks in the pool", pool.num_blocks),
            ("prefix_num_requests_running", "Requests admitted and running", engine.num_running),
            ("prefix_num_requests_waiting", "Requests queued for admission", engine.num_waiting),
        ):
            yield GaugeMetricFamily(name, doc, value=float(value))
        for name, doc, total in (
            ("prefix_cache_evictions", "Cached blocks evicted to be reused", pool.num_evictions),
            (
                "prefix_preemptions",
                "Running requests preempted for KV space",
                sched.num_preemptions,
            ),
            ("prefix_cache_block_queries", "Prefix lookups, in blocks", pool.num_queries),
            ("prefix_cache_block_hits", "Prefix lookups that hit, in blocks", pool.num_hit_blocks),
            (
                "prefix_engine_step_failures",
                "Engine steps that raised (their requests ended with finish_reason error)",
                engine.step_failures.total,
            ),
        ):
            yield CounterMetricFamily(name, doc, value=float(total))
        tiers = engine.tiers.stats() if engine.tiers is not None else {}
        if not tiers:
            return
        # One series per level below the pool (l2_host, l3_disk, l3_redis).
        for name, doc, key in (
            ("prefix_tier_hits", "Blocks found in a lower KV tier", "hits"),
            ("prefix_tier_misses", "Lookups that reached a lower KV tier and missed", "misses"),
            ("prefix_tier_bytes_in", "Bytes copied into a lower KV tier", "bytes_in"),
            ("prefix_tier_bytes_out", "Bytes copied back from a lower KV tier", "bytes_out"),
            (
                "prefix_tier_seconds",
                "Time the engine spent moving blocks to/from a tier",
                "seconds",
            ),
            ("prefix_tier_corrupt_blocks", "Stored blocks that failed their checks", "corrupt"),
            (
                "prefix_tier_foreign_blocks",
                "Stored blocks of another record format version (misses, left in place)",
                "foreign",
            ),
            ("prefix_tier_errors", "Tier reads that failed or timed out (misses)", "errors"),
            (
                "prefix_tier_dropped_writes",
                "Blocks not written: write queue full",
                "dropped_writes",
            ),
            (
                "prefix_tier_write_errors",
                "Blocks the store refused or failed to write",
                "write_errors",
            ),
        ):
            family = CounterMetricFamily(name, doc, labels=["tier"])
            for tier, stats in tiers.items():
                if key in stats:
                    family.add_metric([tier], float(stats[key]))
            yield family
        used = GaugeMetricFamily(
            "prefix_tier_used_bytes", "Bytes held by a lower KV tier (-1: unknown)", labels=["tier"]
        )
        for tier, stats in tiers.items():
            used.add_metric([tier], float(stats["used_bytes"]))
        yield used
        capacity = GaugeMetricFamily(
            "prefix_tier_capacity_bytes",
            "Bytes a lower KV tier may hold now (a full filesystem lowers it; -1: unknown)",
            labels=["tier"],
        )
        for tier, stats in tiers.items():
            if "capacity_bytes" in stats:
                capacity.add_metric([tier], float(stats["capacity_bytes"]))
        yield capacity


class EngineMetrics:
    """All engine metrics of one server, in a private ``CollectorRegistry``."""

    def __init__(self, engine: PrefixEngine | None = None) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.cache_queries = Counter(
            "prefix_cache_queries_total",
            "Prompt tokens looked up in the prefix cache (counted when a request finishes)",
            registry=r,
        )
        self.cache_hits = Counter(
            "prefix_cache_hits_total",
            "Prompt tokens whose KV was reused from the prefix cache",
            registry=r,
        )
        self.requests = Counter(
            "prefix_requests_total", "Finished requests", ["finish_reason"], registry=r
        )
        self.prompt_tokens = Counter(
            "prefix_prompt_tokens_total", "Prompt tokens of finished requests", registry=r
        )
        self.generation_tokens = Counter(
            "prefix_generation_tokens_total", "Generated tokens", registry=r
        )
        self.ttft = Histogram(
            "prefix_time_to_first_token_seconds",
            "Engine arrival to first generated token",
            buckets=TTFT_BUCKETS,
            registry=r,
        )
        self.tpot = Histogram(
            "prefix_time_per_output_token_seconds",
            "Mean time per generated token after the first, per request",
            buckets=TPOT_BUCKETS,
            registry=r,
        )
        self._first_token_at: dict[str, float] = {}
        self._lock = threading.Lock()
        if engine is not None:
            r.register(_EngineCollector(engine))

    def observe(self, out: RequestOutput) -> None:
        """The ``AsyncEngine.on_output`` hook: one call per request per engine step."""
        now = time.perf_counter()
        if out.new_token_ids:
            self.generation_tokens.inc(len(out.new_token_ids))
        with self._lock:
            if out.ttft_s is not None and out.request_id not in self._first_token_at:
                self.ttft.observe(out.ttft_s)  # the first output that carries a token
                self._first_token_at[out.request_id] = now
            first = self._first_token_at.pop(out.request_id, None) if out.finished else None
        if not out.finished:
            return
        reason = out.finish_reason or "unknown"
        self.requests.labels(finish_reason=reason).inc()
        if reason in ("abort", "error") and out.ttft_s is None:
            return  # cancelled (or its step failed) before its prefill completed
        self.cache_queries.inc(out.prompt_tokens)
        self.cache_hits.inc(out.cached_tokens)
        self.prompt_tokens.inc(out.prompt_tokens)
        if first is not None and out.completion_tokens > 1:
            self.tpot.observe((now - first) / (out.completion_tokens - 1))

    def render(self) -> bytes:
        """Every metric in the Prometheus text exposition format."""
        return generate_latest(self.registry)
