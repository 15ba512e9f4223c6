"""One request's state inside the engine (torch-free).

A sequence owns a ``block_table`` (logical block i → physical block id) and the
chained keys of its full blocks. ``num_computed_tokens`` says how many of its
tokens already have K/V in the cache; ``num_cached_tokens`` how many of those
were reused from earlier requests instead of computed.
"""

from __future__ import annotations

import enum
import itertools
from dataclasses import dataclass, field

from prefix.core.hashing import Extra, block_key

_ids = itertools.count()


class SequenceStatus(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass
class Sequence:
    prompt_token_ids: list[int]
    root: bytes  # chain root: model fingerprint + namespace + salts
    block_size: int
    max_tokens: int
    request_id: str = field(default_factory=lambda: f"seq-{next(_ids)}")
    extras: tuple[Extra, ...] = ()  # typed extras mixed into every block key (LoRA)
    output_token_ids: list[int] = field(default_factory=list)
    block_table: list[int] = field(default_factory=list)
    block_keys: list[bytes] = field(default_factory=list)
    num_computed_tokens: int = 0
    num_cached_tokens: int = 0
    num_committed_blocks: int = 0
    status: SequenceStatus = SequenceStatus.WAITING
    finish_reason: str | None = None
    num_preemptions: int = 0
    arrival_time: float = 0.0
    # Per-tenant KV quota: sequences sharing a quota_key may hold at most
    # kv_block_quota blocks at once (counted per sequence, shared blocks included).
    quota_key: str | None = None
    kv_block_quota: int | None = None
    # Whose request this is, for fair admission across tenants (the tenant id, else the
    # namespace); "" for requests that name nobody.
    tenant_key: str = ""
    # False: no later request can share this sequence's chain root, so its blocks are
    # neither matched nor committed (prefix caching off for it alone): they go back to
    # the free list on release instead of displacing reusable blocks, in L1 and below.
    cache_kv: bool = True

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.prompt_token_ids)

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_token_ids) + len(self.output_token_ids)

    @property
    def token_ids(self) -> list[int]:
        return self.prompt_token_ids + self.output_token_ids

    @property
    def num_full_blocks(self) -> int:
        return self.num_tokens // self.block_size

    @property
    def is_finished(self) -> bool:
        return self.status is SequenceStatus.FINISHED

    def num_blocks_for(self, num_tokens: int) -> int:
        return -(-num_tokens // self.block_size)

    def max_reusable_blocks(self) -> int:
        """Blocks an admission may take from the cache.

        The last token is always recomputed: the cache holds K/V, not the logits of
        the final position. N=12, B=4 → 2 blocks (8 tokens); N=13 → 3. A preempted
        sequence is re-admitted over prompt + output, so this counts all tokens.
        """
        return (self.num_tokens - 1) // self.block_size

    @property
    def num_uncomputed_tokens(self) -> int:
        return self.num_tokens - self.num_computed_tokens

    def extend_keys(self) -> None:
        """Compute chained keys for every block that is full but has no key yet."""
        tokens = self.token_ids
        parent = self.block_keys[-1] if self.block_keys else self.root
        for i in range(len(self.block_keys), self.num_full_blocks):
            start = i * self.block_size
            parent = block_key(parent, tokens[start : start + self.block_size], self.extras)
            self.block_keys.append(parent)

    def slot(self, position: int) -> int:
        """Flat cache slot of the token at absolute ``position``."""
        return self.block_table[position // self.block_size] * self.block_size + (
            position % self.block_size
        )
