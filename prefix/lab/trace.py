"""Replay a mix of repeated and unique documents through a finite-capacity pool.

Request hit rate and token hit rate are reported side by side (seed 000: a high
request hit rate can hide a low token hit rate), for each eviction policy on
the same trace.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from prefix.core.block_manager import BlockManager
from prefix.core.block_pool import BlockPool
from prefix.core.sequence import Sequence
from prefix.lab.experiment import lab_root


@dataclass(frozen=True)
class TraceConfig:
    num_requests: int = 2000
    block_size: int = 16
    capacity_blocks: int = 512
    num_system_prompts: int = 4  # short prefixes that nearly every request starts with
    system_prompt_tokens: int = 128
    num_documents: int = 40  # repeated RAG documents, Zipf popularity
    document_tokens: int = 512
    unique_fraction: float = 0.3  # requests carrying a one-off long document instead
    unique_tokens: int = 1024
    question_tokens: int = 24
    seed: int = 0


@dataclass(frozen=True)
class TraceResult:
    policy: str
    num_requests: int
    request_hit_rate: float
    token_hit_rate: float
    num_evictions: int


def build_trace(cfg: TraceConfig) -> list[list[int]]:
    rng = random.Random(cfg.seed)
    next_token = iter(range(10**9))

    def fresh(n: int) -> list[int]:
        return [next(next_token) for _ in range(n)]

    systems = [fresh(cfg.system_prompt_tokens) for _ in range(cfg.num_system_prompts)]
    documents = [fresh(cfg.document_tokens) for _ in range(cfg.num_documents)]
    doc_weights = [1.0 / (rank + 1) for rank in range(cfg.num_documents)]
    trace = []
    for _ in range(cfg.num_requests):
        system = systems[rng.randrange(len(systems))]
        if rng.random() < cfg.unique_fraction:
            body = fresh(cfg.unique_tokens)
        else:
            body = rng.choices(documents, weights=doc_weights)[0]
        trace.append(system + body + fresh(cfg.question_tokens))
    return trace


def replay(trace: list[list[int]], cfg: TraceConfig, policy: str) -> TraceResult:
    manager = BlockManager(BlockPool(cfg.capacity_blocks, policy=policy), cfg.block_size)
    root = lab_root(cfg.block_size, "trace")
    hits = hit_tokens = total_tokens = 0
    for tokens in trace:
        seq = Sequence(tokens, root, cfg.block_size, max_tokens=1)
        if not manager.admit(seq):
            raise ValueError("capacity_blocks is smaller than one request")
        seq.num_computed_tokens = seq.num_prompt_tokens
        manager.commit_full_blocks(seq)
        manager.release(seq)
        hits += seq.num_cached_tokens > 0
        hit_tokens += seq.num_cached_tokens
        total_tokens += seq.num_prompt_tokens
    manager.pool.check_integrity()
    return TraceResult(
        policy=policy,
        num_requests=len(trace),
        request_hit_rate=hits / len(trace),
        token_hit_rate=hit_tokens / total_tokens,
        num_evictions=manager.pool.num_evictions,
    )


def compare_policies(cfg: TraceConfig, policies: tuple[str, ...] = ("lru", "coverage")) -> str:
    trace = build_trace(cfg)
    lines = [
        f"trace: {cfg.num_requests} requests, capacity {cfg.capacity_blocks} blocks of "
        f"{cfg.block_size} tokens, {cfg.unique_fraction:.0%} with a unique "
        f"{cfg.unique_tokens}-token document",
        f"{'policy':<10} {'request hit rate':>17} {'token hit rate':>15} {'evictions':>10}",
    ]
    for policy in policies:
        r = replay(trace, cfg, policy)
        lines.append(
            f"{r.policy:<10} {r.request_hit_rate:>16.1%} {r.token_hit_rate:>15.1%} "
            f"{r.num_evictions:>10}"
        )
    return "\n".join(lines)
