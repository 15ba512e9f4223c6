"""The flat variable-length batch one model forward runs over.

The new tokens of every sequence are concatenated (``[T]``) with their ABSOLUTE
positions and the cache slot each one's K/V goes to; each sequence brings its
own ``block_table``, so sequences that share a prefix share physical blocks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class SeqChunk:
    """The new tokens of one sequence in a step, and where its context lives."""

    token_ids: Sequence[int]  # new tokens of this step
    start_pos: int  # absolute position of token_ids[0] == tokens already cached
    block_table: Sequence[int]  # physical block ids covering [0, start_pos + len(token_ids))


@dataclass
class ForwardBatch:
    input_ids: torch.Tensor  # [T] tokens of all sequences, concatenated
    positions: torch.Tensor  # [T] absolute positions (never renumbered from 0)
    slot_mapping: torch.Tensor  # [T] cache slot each new token's K/V is written to
    block_tables: list[torch.Tensor]  # per sequence LongTensor[num_blocks_of_seq]
    seq_lens: list[int]  # per sequence: context length after this step (cached + new)
    query_lens: list[int]  # per sequence: new tokens in this step; sum == T
    logits_indices: torch.Tensor  # [S'] rows of the flat hidden states to project to logits

    @property
    def num_seqs(self) -> int:
        return len(self.seq_lens)

    @property
    def is_decode(self) -> bool:
        return all(q == 1 for q in self.query_lens)

    @classmethod
    def from_chunks(
        cls,
        chunks: Sequence[SeqChunk],
        block_size: int,
        device: torch.device | str = "cpu",
        all_logits: bool = False,
    ) -> ForwardBatch:
        """Flatten chunks; logits for each chunk's last token (or every token)."""
        if not chunks:
            raise ValueError("a forward batch needs at least one sequence")
        ids: list[int] = []
        positions: list[int] = []
        slots: list[int] = []
        logits_rows: list[int] = []
        tables: list[torch.Tensor] = []
        seq_lens: list[int] = []
        query_lens: list[int] = []
        for chunk in chunks:
            n = len(chunk.token_ids)
            seq_len = chunk.start_pos + n
            if n < 1 or chunk.start_pos < 0:
                raise ValueError(f"bad chunk: {n} tokens at start_pos {chunk.start_pos}")
            if len(chunk.block_table) * block_size < seq_len:
                raise ValueError(
                    f"block table of {len(chunk.block_table)} blocks x {block_size} "
                    f"cannot hold {seq_len} tokens"
                )
            first_row = len(ids)
            for i, tok in enumerate(chunk.token_ids):
                pos = chunk.start_pos + i
                ids.append(int(tok))
                positions.append(pos)
                slots.append(
                    int(chunk.block_table[pos // block_size]) * block_size + pos % block_size
                )
            rows = range(first_row, first_row + n) if all_logits else [first_row + n - 1]
            logits_rows.extend(rows)
            tables.append(torch.tensor(list(chunk.block_table), dtype=torch.long, device=device))
            seq_lens.append(seq_len)
            query_lens.append(n)

        def as_long(values: list[int]) -> torch.Tensor:
            return torch.tensor(values, dtype=torch.long, device=device)

        return cls(
            input_ids=as_long(ids),
            positions=as_long(positions),
            slot_mapping=as_long(slots),
            block_tables=tables,
            seq_lens=seq_lens,
            query_lens=query_lens,
            logits_indices=as_long(logits_rows),
        )

    @classmethod
    def for_prefill(
        cls,
        token_ids: Sequence[int],
        start_pos: int,
        block_table: Sequence[int],
        block_size: int,
        device: torch.device | str = "cpu",
        all_logits: bool = False,
    ) -> ForwardBatch:
        """One sequence: ``token_ids`` are new, the first ``start_pos`` tokens are cached."""
        return cls.from_chunks(
            [SeqChunk(token_ids, start_pos, block_table)], block_size, device, all_logits
        )

    @classmethod
    def for_decode(
        cls,
        token_ids: Sequence[int],
        positions: Sequence[int],
        block_tables: Sequence[Sequence[int]],
        block_size: int,
        device: torch.device | str = "cpu",
    ) -> ForwardBatch:
        """One new token per sequence; ``positions[i]`` = tokens already cached for seq i."""
        if not len(token_ids) == len(positions) == len(block_tables):
            raise ValueError("token_ids, positions and block_tables must have equal lengths")
        chunks = [
            SeqChunk([tok], pos, table)
            for tok, pos, table in zip(token_ids, positions, block_tables, strict=True)
        ]
        return cls.from_chunks(chunks, block_size, device)
