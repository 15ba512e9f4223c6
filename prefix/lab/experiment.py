"""The seed's experiment: change one token, watch the hash chain (torch-free).

Two prompts of ``num_tokens`` tokens differ at ``change_position``. The first
is computed and its full blocks committed; the second is admitted through the
same ``BlockManager`` the engine uses, so ``reused`` is what the engine would
skip. Defaults (13 tokens, change at 5, B=4) give reused=4 recompute=9.
"""

from __future__ import annotations

from dataclasses import dataclass

from prefix.core.block_manager import BlockManager
from prefix.core.block_pool import BlockPool
from prefix.core.hashing import ModelFingerprint, chain_root, short
from prefix.core.sequence import Sequence

LAB_FINGERPRINT = dict(model_id="lab-model", weights_digest="lab", dtype="float32")


@dataclass(frozen=True)
class ExperimentResult:
    num_tokens: int
    block_size: int
    change_position: int | None
    reused: int
    recompute: int
    first_diff: int | None  # first differing token position (0-based)
    namespace_a: str
    namespace_b: str
    keys_a: list[str]
    keys_b: list[str]


def lab_root(block_size: int, namespace: str, salt: str = "lab-salt") -> bytes:
    fp = ModelFingerprint(block_size=block_size, position_config="rope=default", **LAB_FINGERPRINT)
    return chain_root(fp, namespace, salt)


def run_experiment(
    num_tokens: int = 13,
    change_position: int | None = 5,
    block_size: int = 4,
    namespace_a: str = "tenant-a",
    namespace_b: str | None = None,
    prompt_b_extra: int = 0,
) -> ExperimentResult:
    """Compute prompt A, then admit prompt B (A with one token changed, optionally longer)."""
    if num_tokens < 1 or block_size < 1:
        raise ValueError("num_tokens and block_size must be >= 1")
    if change_position is not None and not 0 <= change_position < num_tokens:
        raise ValueError(f"change_position must be in [0, {num_tokens})")
    namespace_b = namespace_b or namespace_a
    tokens_a = [1000 + i for i in range(num_tokens)]
    tokens_b = list(tokens_a) + [5000 + i for i in range(prompt_b_extra)]
    if change_position is not None:
        tokens_b[change_position] += 1
    manager = BlockManager(BlockPool(256), block_size)

    first = Sequence(tokens_a, lab_root(block_size, namespace_a), block_size, max_tokens=1)
    if not manager.admit(first):
        raise RuntimeError("lab pool too small")
    first.num_computed_tokens = first.num_prompt_tokens  # "run" the prefill
    manager.commit_full_blocks(first)
    manager.release(first)

    second = Sequence(tokens_b, lab_root(block_size, namespace_b), block_size, max_tokens=1)
    if not manager.admit(second):
        raise RuntimeError("lab pool too small")
    reused = second.num_cached_tokens
    manager.release(second)
    manager.pool.check_integrity()
    diff = next(
        (i for i, (a, b) in enumerate(zip(tokens_a, tokens_b, strict=False)) if a != b), None
    )
    return ExperimentResult(
        num_tokens=len(tokens_b),
        block_size=block_size,
        change_position=change_position,
        reused=reused,
        recompute=len(tokens_b) - reused,
        first_diff=diff,
        namespace_a=short(first.root),
        namespace_b=short(second.root),
        keys_a=[short(k) for k in first.block_keys],
        keys_b=[short(k) for k in second.block_keys],
    )


def explain(result: ExperimentResult) -> str:
    """What the seed's debugging advice asks for: first diff, block boundary, namespace."""
    b = result.block_size
    lines = [f"block_size={b} tokens={result.num_tokens}"]
    if result.first_diff is None:
        lines.append("first differing token: none (identical prompts)")
    else:
        boundary = result.first_diff // b * b
        lines.append(
            f"first differing token: position {result.first_diff}, inside block "
            f"{result.first_diff // b} (tokens {boundary}..{boundary + b - 1}); reuse can only "
            f"reach the block boundary at {boundary}"
        )
    same_ns = result.namespace_a == result.namespace_b
    lines.append(
        f"namespace: A={result.namespace_a} B={result.namespace_b} "
        f"({'same chain root' if same_ns else 'different roots: nothing can match'})"
    )
    for i, key_b in enumerate(result.keys_b):
        key_a = result.keys_a[i] if i < len(result.keys_a) else "-"
        mark = "hit " if i < result.reused // b else "miss"
        lines.append(f"  block {i}: A={key_a} B={key_b} {mark}")
    tail = result.num_tokens - len(result.keys_b) * b
    if tail:
        lines.append(f"  tail: {tail} token(s) in a partial block (never keyed, always computed)")
    lines.append(f"reused={result.reused} recompute={result.recompute}")
    return "\n".join(lines)
