"""The token sampler (greedy, seeded temperature / top-k / top-p) over ``SamplingParams``.

The parameters themselves are wire-level and torch-free (``protocol/sampling.py``).
"""

from __future__ import annotations

import torch

from protocol.sampling import SamplingParams

__all__ = ["Sampler", "SamplingParams"]


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
        if not bool(torch.isfinite(probs).all()):
            # NaN or infinite logits (a numerical fault in the forward): the best finite
            # token, not an invalid distribution that fails the request's whole batch.
            return int(torch.argmax(torch.nan_to_num(logits.float(), nan=-torch.inf)).item())
        if 0 < self.params.top_k < probs.shape[-1]:
            # The k most likely tokens (ties at the k-th kept), renormalized so top_p
            # reads their mass, as vLLM applies top_k before top_p.
            kth = torch.topk(probs, self.params.top_k).values[-1]
            probs = torch.where(probs >= kth, probs, torch.zeros_like(probs))
            probs = probs / probs.sum()
        if self.params.top_p < 1.0:
            sorted_probs, sorted_ids = torch.sort(probs, descending=True)
            cumulative = torch.cumsum(sorted_probs, dim=-1)
            # Keep the smallest set whose mass reaches top_p: a token stays if the mass
            # *before* it is still below top_p. The top token always survives, also
            # for a top_p too small for float32 (1e-300 rounds to 0.0, which kept none
            # and made multinomial raise for the whole batch).
            keep = (cumulative - sorted_probs) < self.params.top_p
            keep[0] = True
            sorted_probs = torch.where(keep, sorted_probs, torch.zeros_like(sorted_probs))
            choice = torch.multinomial(sorted_probs, 1, generator=self.generator)
            return int(sorted_ids[choice].item())
        return int(torch.multinomial(probs, 1, generator=self.generator).item())
