"""The seed's worked numbers, each computed from its inputs (torch-free).

Memory is accounted through a real ``BlockPool``: shared prefixes share
physical blocks, so physical KV is counted in blocks, not by summing the
lengths of the requests' block tables.
"""

from __future__ import annotations

from dataclasses import dataclass

from prefix.core.block_manager import BlockManager
from prefix.core.block_pool import BlockPool
from prefix.core.sequence import Sequence
from prefix.lab.experiment import lab_root, run_experiment

KiB = 1024
MiB = 1024 * 1024


@dataclass(frozen=True)
class MemoryExample:
    num_requests: int
    shared_tokens: int
    private_tokens: int
    block_size: int
    kv_bytes_per_token: int
    logical_blocks: int  # sum of block-table lengths
    physical_blocks: int  # distinct blocks in use
    logical_bytes: int
    physical_bytes: int

    @property
    def saved_bytes(self) -> int:
        return self.logical_bytes - self.physical_bytes


def memory_example(
    num_requests: int = 3,
    shared_tokens: int = 1024,
    private_tokens: int = 128,
    block_size: int = 16,
    kv_bytes_per_token: int = 128 * KiB,
) -> MemoryExample:
    """Admit the requests concurrently (all pinned at once) and count blocks in the pool."""
    total = shared_tokens + private_tokens
    pool = BlockPool(num_requests * (-(-total // block_size)) + 1)
    manager = BlockManager(pool, block_size)
    root = lab_root(block_size, "memory-example")
    shared = list(range(shared_tokens))
    running = []
    for r in range(num_requests):
        private = [100_000 + r * private_tokens + i for i in range(private_tokens)]
        seq = Sequence(shared + private, root, block_size, max_tokens=1)
        if not manager.admit(seq):
            raise RuntimeError("pool too small for the memory example")
        seq.num_computed_tokens = seq.num_prompt_tokens
        manager.commit_full_blocks(seq)
        running.append(seq)
    logical = sum(len(s.block_table) for s in running)
    physical = pool.num_used_blocks
    pool.check_integrity()
    for seq in running:
        manager.release(seq)
    bytes_per_block = block_size * kv_bytes_per_token
    return MemoryExample(
        num_requests,
        shared_tokens,
        private_tokens,
        block_size,
        kv_bytes_per_token,
        logical,
        physical,
        logical * bytes_per_block,
        physical * bytes_per_block,
    )


@dataclass(frozen=True)
class TTFTModel:
    """Linear teaching model: TTFT = fixed + per_token × prefilled tokens."""

    fixed_ms: float
    per_token_ms: float

    def ttft_ms(self, prefill_tokens: int) -> float:
        return self.fixed_ms + self.per_token_ms * prefill_tokens

    def compare(self, num_tokens: int, hit_tokens: int) -> dict[str, float]:
        full = self.ttft_ms(num_tokens)
        hit = self.ttft_ms(num_tokens - hit_tokens)
        return {
            "ttft_full_ms": full,
            "ttft_hit_ms": hit,
            "prefill_tokens_saved_pct": 100.0 * hit_tokens / num_tokens,
            "ttft_reduction_pct": 100.0 * (full - hit) / full,
            "speedup": full / hit,
        }


def attention_pairs(num_tokens: int, hit_tokens: int) -> dict[str, float]:
    """Causal query-key pairs: query i sees keys 0..i, so the full prefill has N(N+1)/2."""
    full = num_tokens * (num_tokens + 1) // 2
    skipped = hit_tokens * (hit_tokens + 1) // 2
    return {
        "full_pairs": full,
        "remaining_pairs": full - skipped,
        "pairs_saved_pct": 100.0 * skipped / full,
        "queries_skipped_pct": 100.0 * hit_tokens / num_tokens,
    }


def hit_rates(requests: list[tuple[int, int]]) -> dict[str, float]:
    """``requests``: (prompt tokens, hit tokens). A request counts as a hit if it reused any."""
    hits = sum(1 for _, h in requests if h > 0)
    tokens = sum(n for n, _ in requests)
    hit_tokens = sum(h for _, h in requests)
    return {
        "request_hit_rate_pct": 100.0 * hits / len(requests),
        "token_hit_rate_pct": 100.0 * hit_tokens / tokens,
    }


def seed_hit_rate_example() -> dict[str, float]:
    """100 ten-token requests that fully hit, plus one 10,000-token request that misses."""
    return hit_rates([(10, 10)] * 100 + [(10_000, 0)])


def exercise_prefix(prefix_tokens: int = 35, block_size: int = 16) -> dict[str, int]:
    """A cached prefix of 35 tokens with B=16: how much does the next request skip?"""
    result = run_experiment(
        num_tokens=prefix_tokens, change_position=None, block_size=block_size, prompt_b_extra=8
    )
    return {
        "prefix_tokens": prefix_tokens,
        "block_size": block_size,
        "reused": result.reused,
        "recomputed_prefix_tokens": prefix_tokens - result.reused,
    }


def format_numbers(measured: TTFTModel | None = None) -> str:
    m = memory_example()
    lines = [
        "== memory (3 requests, 1,024 shared + 128 private tokens, 128 KiB/token, B=16) ==",
        f"logical blocks {m.logical_blocks} -> physical blocks {m.physical_blocks}",
        f"physical KV {m.logical_bytes / MiB:.0f} MiB -> {m.physical_bytes / MiB:.0f} MiB, "
        f"saved {m.saved_bytes / MiB:.0f} MiB; each request's logical length stays "
        f"{m.shared_tokens + m.private_tokens} tokens",
    ]
    teach = TTFTModel(fixed_ms=55.0, per_token_ms=0.05).compare(4000, 3072)
    lines += [
        "== TTFT teaching model (N=4,000, H=3,072, 0.05 ms/token, 55 ms fixed) ==",
        _format_ttft(teach),
    ]
    if measured is not None:
        lines += [
            f"== same model, coefficients measured on this engine (fixed "
            f"{measured.fixed_ms:.1f} ms, {measured.per_token_ms:.4f} ms/token) ==",
            _format_ttft(measured.compare(4000, 3072)),
        ]
    a = attention_pairs(4096, 3072)
    lines += [
        "== attention pairs (N=4,096, H=3,072) ==",
        f"full {a['full_pairs']:,} pairs, remaining {a['remaining_pairs']:,}; skipping "
        f"{a['queries_skipped_pct']:.0f}% of queries saves {a['pairs_saved_pct']:.2f}% of pairs",
    ]
    h = seed_hit_rate_example()
    lines += [
        "== hit rates (100 ten-token hits + one 10,000-token miss) ==",
        f"request hit rate {h['request_hit_rate_pct']:.1f}%, "
        f"token hit rate {h['token_hit_rate_pct']:.1f}%",
    ]
    e = exercise_prefix()
    lines += [
        "== exercise: prefix 35, block 16 ==",
        f"reused={e['reused']} (two full blocks); the other "
        f"{e['recomputed_prefix_tokens']} prefix tokens are recomputed",
    ]
    return "\n".join(lines)


def _format_ttft(c: dict[str, float]) -> str:
    return (
        f"TTFT {c['ttft_full_ms']:.1f} ms -> {c['ttft_hit_ms']:.1f} ms: "
        f"{c['prefill_tokens_saved_pct']:.1f}% fewer prefill tokens, "
        f"TTFT -{c['ttft_reduction_pct']:.2f}%, {c['speedup']:.3f}x"
    )
