"""One request while the engine runs it: its sequence, sampler and detokenizer, the
outputs it hands back, and the line logged when it finishes."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from prefix.core.hashing import short
from prefix.core.sequence import Sequence
from prefix.model.sampling import Sampler
from prefix.model.tokenize import Detokenizer
from prefix.serve.outputs import RequestOutput
from protocol.sampling import SamplingParams

log = logging.getLogger("cachegate.prefix")


@dataclass
class ActiveRequest:
    seq: Sequence
    params: SamplingParams
    sampler: Sampler
    detok: Detokenizer
    arrival: float
    first_token_at: float | None = None
    scheduled_at: float | None = None

    def output(
        self, new_tokens: list[int], delta: str, finished: bool, reason: str | None = None
    ) -> RequestOutput:
        seq = self.seq
        ttft = None if self.first_token_at is None else self.first_token_at - self.arrival
        return RequestOutput(
            request_id=seq.request_id,
            new_token_ids=new_tokens,
            delta=delta,
            finished=finished,
            finish_reason=reason,
            prompt_tokens=seq.num_prompt_tokens,
            cached_tokens=seq.num_cached_tokens,
            completion_tokens=len(seq.output_token_ids),
            ttft_s=ttft,
            arrival_at=self.arrival,
            scheduled_at=self.scheduled_at,
        )

    def final_output(self, reason: str, new_tokens: list[int], block_size: int) -> RequestOutput:
        """The last output (the detokenizer's held-back tail with it), logged."""
        out = self.output(new_tokens, self.detok.delta(final=True), True, reason)
        seq = self.seq
        fields: dict[str, Any] = {
            "request_id": seq.request_id,
            "prompt_tokens": seq.num_prompt_tokens,
            "reused_tokens": seq.num_cached_tokens,
            "first_miss_block": seq.num_cached_tokens // block_size,
            "namespace_id": short(seq.root),  # a digest, never the namespace or salt
            "ttft_ms": None if out.ttft_s is None else round(out.ttft_s * 1000, 2),
            "finish_reason": reason,
            "preemptions": seq.num_preemptions,
        }
        # key=value in the message for people, the same fields as record attributes for
        # structured handlers (JSON formatters read them from `extra`).
        log.info(
            "request finished %s", " ".join(f"{k}={v}" for k, v in fields.items()), extra=fields
        )
        return out
