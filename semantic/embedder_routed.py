"""``auto``: each question to the embedder that represents it, MiniLM where it can (English:
every letter of Latin script, and not another language by :mod:`semantic.latin_language`)
and multilingual-e5 for the rest (Chinese, Spanish, German …, and any question with a
word MiniLM cannot see), in one vector space where the two never meet.

Neither embedder is best for all traffic (``bench/embedder_compare.py``): MiniLM ranks
English better, and refuses every Chinese question (it cannot represent them: the
coverage floor of :mod:`semantic.embedders`); e5 represents Chinese, but its English
scores are bunched near 1. A gateway with tenants in both languages had to pick one.
:class:`RoutedEmbedder` gives each question the first embedder that covers it:

====================  =======================================  =====================
route                 vector (``dim`` = 384 + 1 + 384)         cosine of two of them
====================  =======================================  =====================
MiniLM (covers it)    ``[√S·u, √(1 − S), 0 … 0]``              ``1 − S·(1 − c)``
e5 (the rest)         ``[0 … 0, 0, v]``                        ``c``
====================  =======================================  =====================

where ``c`` is the route's own cosine. Vectors of the two routes have disjoint
supports, so their cosine is 0: an English question is never compared with a Chinese
one as if the two spaces were one. ``S`` (:data:`SQUEEZE`) maps MiniLM's cosine onto
e5's scale, ordering kept, so that one threshold means what each embedder's measured
threshold means on its own: MiniLM's retrieval threshold behind the pair verifier,
0.84, lands on e5's, 0.95 (``1 − 0.3125 × 0.16 = 0.95``), and ``gateway/verification.py``
gives ``auto`` 0.95. Scores of English questions therefore read on that scale: a
MiniLM cosine of 0.89 shows as 0.9656; a threshold a tenant sets (``threshold``,
``retrieval_threshold``) stays a MiniLM cosine and is put on the scale by
:func:`on_routed_scale` (0.89 → 0.9656, for Chinese questions stricter than e5's).

The id names both embedders (``auto:<minilm id>+<e5 id>``), so the cache partitions
by the pair, and switching to or from ``auto`` re-embeds as any switch does
(``semantic/migrate.py``). Which questions take which route is part of what a vector
means, so the id also names the route rule, ``:en1`` (``latin_language.RULE_VERSION``)
since the first route takes English only (session 27; before, a Spanish question went
to MiniLM); a change of that rule changes its version.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from semantic.embedder_base import CoveringEmbedder
from semantic.embedder_e5 import E5_SCALE
from semantic.latin_language import RULE_VERSION

#: MiniLM's cosine c reads as 1 − SQUEEZE·(1 − c): its measured retrieval threshold
#: (0.84) on e5's (0.95), both from gateway/verification.py's RETRIEVAL_THRESHOLDS.
SQUEEZE = (1 - 0.95) / (1 - 0.84)

#: The embedder id prefix of a routed embedder.
ROUTED_PREFIX = "auto:"


def on_routed_scale(cosine: float) -> float:
    """A MiniLM cosine (what every threshold a tenant sets is written in) on the routed
    scale: the same English questions pass, and Chinese ones at e5's stricter reading."""
    return 1 - SQUEEZE * (1 - cosine)


def as_minilm_cosine(score: float) -> float:
    """A score on the routed scale as the MiniLM cosine a tenant's threshold knob takes
    (the inverse of :func:`on_routed_scale`; 0 where no MiniLM cosine maps there)."""
    return max(0.0, 1 - (1 - score) / SQUEEZE)


def is_routed(embedder_id: str) -> bool:
    return embedder_id.startswith(ROUTED_PREFIX)


def knobs_on_e5_scale(embedder: object) -> bool:
    """Whether a similarity knob a tenant sets (a MiniLM cosine) is put on e5's scale by
    :func:`on_routed_scale` for this embedder: ``auto``'s routed scale, or any e5's own
    (its ``cosine_scale``, whatever its model file is called; also through a proxy that
    passes attributes on, as tracing's does). Since session 30: read raw there, the
    default 0.89 served 44% of Chinese hard negatives with the verifier off. Other
    embedders take it as given."""
    embedder_id = getattr(embedder, "embedder_id", "")
    return is_routed(embedder_id) or getattr(embedder, "cosine_scale", None) == E5_SCALE


def band_on_routed_scale(band: float, first_route: bool) -> float:
    """A width in MiniLM cosine (a sampling band) on the routed scale: narrower by
    SQUEEZE for a question of the first route; e5's own for the second."""
    return band * SQUEEZE if first_route else band


class RoutedEmbedder:
    """Questions ``first`` covers (at ``floor``) go to it, the rest to ``second``."""

    name = "auto"

    def __init__(
        self, first: CoveringEmbedder, second: CoveringEmbedder, floor: float = 1.0
    ) -> None:
        self.first, self.second, self.floor = first, second, floor
        # The scale and the floor are part of what a vector means: re-measured thresholds
        # (a new SQUEEZE) or another floor make other vectors, under another id.
        rule = f":{RULE_VERSION}" if getattr(first, "english_only", False) else ""
        self._embedder_id = (
            f"{ROUTED_PREFIX}s{SQUEEZE:.4f}:f{floor:g}{rule}:"
            f"{first.embedder_id}+{second.embedder_id}"
        )
        self._dim = first.dim + 1 + second.dim

    @property
    def embedder_id(self) -> str:
        return self._embedder_id

    @property
    def dim(self) -> int:
        return self._dim

    def routes_first(self, text: str) -> bool:
        """Whether ``text`` goes to the first embedder (it represents all of it)."""
        return self.first.coverage(text) >= self.floor

    def plain_for(self, texts: Sequence[str]) -> CoveringEmbedder:
        """The one plain embedder to compare ``texts`` with on its own scale (two
        answers, say): the first when it covers all of them, else the second."""
        return self.first if all(self.routes_first(t) for t in texts) else self.second

    def coverage(self, text: str) -> float:
        """The coverage of the embedder the text goes to."""
        return 1.0 if self.routes_first(text) else self.second.coverage(text)

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """``(n, dim)`` unit vectors: each text by its route, in its route's block."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a list of texts, not a single str")
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        routes = [self.routes_first(t) for t in texts]
        first = [i for i, is_first in enumerate(routes) if is_first]
        second = [i for i, is_first in enumerate(routes) if not is_first]
        d1 = self.first.dim
        if first:
            # (n1, d1) unit vectors, scaled, then the constant that keeps them unit
            vectors = self.first.embed([texts[i] for i in first])
            out[first, :d1] = math.sqrt(SQUEEZE) * vectors
            out[first, d1] = math.sqrt(1 - SQUEEZE)
        if second:
            out[second, d1 + 1 :] = self.second.embed([texts[i] for i in second])
        return out

    def __repr__(self) -> str:
        return f"RoutedEmbedder({self._embedder_id!r})"
