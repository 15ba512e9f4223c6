"""Sampling parameters and the token sampler (greedy, seeded temperature / top-p)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from prefix.errors import InvalidSamplingParamsError

GREEDY_BELOW = 1e-5


@dataclass(frozen=True)
class SamplingParams:
    """What to generate. Validated on construction; bad values raise a RequestError."""

    max_tokens: int = 64
    temperature: float = 0.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    seed: int | None = None
    ignore_eos: bool = False
    stop_token_ids: tuple[int, ...] = field(default=())

    def __post_init__(self) -> None:
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int):
            raise InvalidSamplingParamsError(
                f"max_tokens must be an integer, got {self.max_tokens!r}"
            )
        if self.max_tokens <= 0:
            raise InvalidSamplingParamsError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if not (0.0 <= self.temperature <= 2.0) or self.temperature != self.temperature:
            raise InvalidSamplingParamsError(
                f"temperature must be in [0, 2], got {self.temperature}"
            )
        if self.seed is not None and not (-(2**63) <= self.seed < 2**64):
            raise InvalidSamplingParamsError(f"seed must be in [-2**63, 2**64), got {self.seed}")
        if not (0.0 < self.top_p <= 1.0):
            raise InvalidSamplingParamsError(f"top_p must be in (0, 1], got {self.top_p}")
        if any(not isinstance(s, str) or s == "" for s in self.stop):
            raise InvalidSamplingParamsError("stop strings must be non-empty strings")
        if len(self.stop) > 4:
            raise InvalidSamplingParamsError("at most 4 stop strings are allowed")

    @property
    def is_greedy(self) -> bool:
        # Below this, logits / temperature overflows to inf and softmax to NaN; the
        # distribution is a point mass anyway.
        return self.temperature < GREEDY_BELOW


class Sampler:
    """Picks the next token for one sequence.

    A seeded request owns its own ``torch.Generator`` so its samples do not depend
    on what other requests in the same process drew before it.
    """

    def __init__(self, params: SamplingParams, device: torch.device | str = "cpu") -> None:
        self.params = params
        self.generator: torch.Generator | None = None
        if not params.is_greedy:
            self.generator = torch.Generator(device="cpu")
            if params.seed is not None:
                # manual_seed takes [-2**63, 2**64); map negatives into it unambiguously.
                self.generator.manual_seed(params.seed % 2**64)
            else:
                self.generator.seed()

    def sample(self, logits: torch.Tensor) -> int:
        """``logits``: [vocab] float32 for the last position."""
        if self.params.is_greedy:
            return int(torch.argmax(logits).item())
        probs = torch.softmax(logits.float().cpu() / self.params.temperature, dim=-1)
        if self.params.top_p < 1.0:
            sorted_probs, sorted_ids = torch.sort(probs, descending=True)
            cumulative = torch.cumsum(sorted_probs, dim=-1)
            # Keep the smallest set whose mass reaches top_p: a token stays if the mass
            # *before* it is still below top_p, so the top token always survives.
            keep = (cumulative - sorted_probs) < self.params.top_p
            sorted_probs = torch.where(keep, sorted_probs, torch.zeros_like(sorted_probs))
            choice = torch.multinomial(sorted_probs, 1, generator=self.generator)
            return int(sorted_ids[choice].item())
        return int(torch.multinomial(probs, 1, generator=self.generator).item())
