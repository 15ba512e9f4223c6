"""Model runner: turns sequences into one flat varlen ``ForwardBatch`` and runs it.

The runner knows nothing about caching policy; it only translates each
sequence's ``block_table`` into cache slots and reads the logits it needs.
"""

from __future__ import annotations

import torch

from prefix.core.sequence import Sequence
from prefix.model.kv_cache import PagedKVCache
from prefix.model.llama import ForwardBatch, LlamaModel


class ModelRunner:
    def __init__(self, model: LlamaModel, kv_cache: PagedKVCache, device: torch.device) -> None:
        self.model = model
        self.kv_cache = kv_cache
        self.device = device

    @torch.inference_mode()
    def prefill(self, chunks: list[tuple[Sequence, int, int]]) -> torch.Tensor:
        """Run prompt positions ``[start, end)`` of each sequence, attending to its cache.

        Returns [len(chunks), vocab] logits of each chunk's last position. Positions
        stay absolute: a suffix after a cached prefix starts at ``start``, not 0.
        """
        input_ids: list[int] = []
        positions: list[int] = []
        slots: list[int] = []
        query_lens: list[int] = []
        seq_lens: list[int] = []
        for seq, start, end in chunks:
            tokens = seq.token_ids
            input_ids.extend(tokens[start:end])
            positions.extend(range(start, end))
            slots.extend(seq.slot(p) for p in range(start, end))
            query_lens.append(end - start)
            seq_lens.append(end)
        return self._run([c[0] for c in chunks], input_ids, positions, slots, query_lens, seq_lens)

    @torch.inference_mode()
    def decode(self, seqs: list[Sequence]) -> torch.Tensor:
        """One new token per sequence (its last one), all in one forward: [S, vocab]."""
        input_ids = [seq.token_ids[-1] for seq in seqs]
        positions = [seq.num_tokens - 1 for seq in seqs]
        slots = [seq.slot(p) for seq, p in zip(seqs, positions, strict=True)]
        seq_lens = [seq.num_tokens for seq in seqs]
        return self._run(seqs, input_ids, positions, slots, [1] * len(seqs), seq_lens)

    def _run(
        self,
        seqs: list[Sequence],
        input_ids: list[int],
        positions: list[int],
        slots: list[int],
        query_lens: list[int],
        seq_lens: list[int],
    ) -> torch.Tensor:
        def as_long(values: list[int]) -> torch.Tensor:
            return torch.tensor(values, dtype=torch.long, device=self.device)

        # The last row of each sequence's queries in the flat [T] layout.
        ends = torch.cumsum(as_long(query_lens), dim=0) - 1
        batch = ForwardBatch(
            input_ids=as_long(input_ids),
            positions=as_long(positions),
            slot_mapping=as_long(slots),
            block_tables=[
                as_long(seq.block_table[: seq.num_blocks_for(n)])
                for seq, n in zip(seqs, seq_lens, strict=True)
            ],
            seq_lens=seq_lens,
            query_lens=query_lens,
            logits_indices=ends,
        )
        return self.model(batch, self.kv_cache)
