"""The sampling rule of misfire review (gateway/review/sampling.py's docstring): how
likely a hit is to be sampled, and the verifier score a sample keeps."""

from __future__ import annotations

import math

from semantic.embedder_base import TextEmbedder
from semantic.embedder_routed import band_on_routed_scale

BOOST_BAND = 0.03
BOOST_FACTOR = 3.0


def boost_band(embedder: TextEmbedder | None, question: str) -> float:
    """:data:`BOOST_BAND` (a MiniLM width) on the scale of ``question``'s score: narrower
    by auto's squeeze for a question of its MiniLM route (also behind tracing's proxy)."""
    routes_first = getattr(embedder, "routes_first", None)
    if routes_first is None:
        return BOOST_BAND
    return band_on_routed_scale(BOOST_BAND, routes_first(question))


def stored_score(score: float | None) -> float | None:
    """A verifier score as stored with a sample: None unless it is finite and in [0, 1].
    A NaN once stored hung the calibrator (gateway/calibration.py); one above 1 made a
    tenant's cut unusable; such a sample is still reviewable, it just moves no cut."""
    if score is None or not math.isfinite(score) or not 0.0 <= score <= 1.0:
        return None
    return float(score)


def sample_probability(
    rate: float,
    score: float,
    threshold: float,
    band: float = BOOST_BAND,
    boost: float = BOOST_FACTOR,
) -> float:
    """The probability of sampling a hit (see the module docstring)."""
    if rate <= 0.0:
        return 0.0
    if score < threshold + band:
        return min(1.0, rate * boost)
    return min(1.0, rate)
