"""Per-call cache policy: the knobs a tenant's policy sets for one request."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

#: Default similarity threshold (cosine), chosen by bench/semantic_eval.py: the
#: lowest threshold where, with the validators, misfires on hard and entity
#: negatives are both <= 1% (README, "Choosing the threshold").
DEFAULT_THRESHOLD = 0.89


@dataclass(frozen=True)
class SemanticPolicy:
    """How one lookup or store behaves.

    threshold      minimum cosine similarity for a candidate (0 < threshold <= 1)
    ttl_seconds    lifetime of a stored entry; ``None`` = no expiry; on lookup, an
                   entry whose answer is older is not served either (a TTL lowered
                   or turned on since it was stored): counted from its last write,
                   or with a sliding TTL from its last write or hit
    sliding_ttl    opt-in: a hit pushes the entry's expiry to now + its ttl
                   (absolute expiry by default, so a popular answer cannot
                   live forever without being refreshed from the model)
    entity_kinds   entity kinds the validator compares; ``None`` = all it knows
    guards         scenario guards that apply (checked on lookup and on store)
    top_k          candidates fetched from the index; the best one at or above
                   the threshold that the validator accepts is served
    max_age_seconds  one request's freshness bound (``Cache-Control: max-age``):
                   entries whose answer is older are not served to it, and, since
                   they may still be fresh for others, are neither expired nor deleted
    verifier_cut   when set, a candidate that passed the threshold and the validator
                   is served only if the pair verifier scores it above this cut
                   (:mod:`semantic.verification`); ``None`` = no verification
    pending_band   (low, high) cosines: a hit scored inside (inclusive) is returned
                   uncounted, its expiry unmoved (``LookupResult.is_pending``), for a
                   check of the caller's (the gateway's judge) to confirm with
                   :meth:`SemanticCache.confirm_hit`; a refused one leaves no trace
    """

    threshold: float = DEFAULT_THRESHOLD
    ttl_seconds: int | None = None
    sliding_ttl: bool = False
    entity_kinds: Collection[str] | None = None
    guards: Collection[str] = ()
    top_k: int = 5
    max_age_seconds: int | None = None
    verifier_cut: float | None = None
    pending_band: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if not 0.0 < self.threshold <= 1.0:
            raise ValueError(f"threshold must be in (0, 1], got {self.threshold}")
        if self.ttl_seconds is not None and self.ttl_seconds <= 0:
            raise ValueError(f"ttl_seconds must be positive or None, got {self.ttl_seconds}")
        if self.max_age_seconds is not None and self.max_age_seconds < 0:
            raise ValueError(f"max_age_seconds must be >= 0 or None, got {self.max_age_seconds}")
        if self.verifier_cut is not None and not 0.0 <= self.verifier_cut <= 1.0:
            raise ValueError(f"verifier_cut must be in [0, 1] or None, got {self.verifier_cut}")
        band = self.pending_band
        if band is not None and not (len(band) == 2 and band[0] <= band[1]):
            raise ValueError(f"pending_band must be (low, high) with low <= high, got {band}")
        if self.top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {self.top_k}")
        if isinstance(self.guards, str) or isinstance(self.entity_kinds, str):
            raise TypeError("guards and entity_kinds are collections of names, not one str")

    def reaches(self, score: float) -> bool:
        """Whether a cosine ``score`` is at the threshold, within float32 rounding: an
        inner product of two unit vectors comes out up to ~1e-6 from the exact value,
        so a threshold of 1.0 ("identical only") would otherwise never match at all."""
        return score >= self.threshold - COSINE_TOLERANCE

    def is_pending(self, score: float) -> bool:
        """Whether a hit scored ``score`` waits for the caller's confirmation."""
        band = self.pending_band
        return band is not None and band[0] <= score <= band[1]


#: What float32 rounding may take off a cosine (384-d inner products: ~1e-6).
COSINE_TOLERANCE = 1e-5

DEFAULT_POLICY = SemanticPolicy()
