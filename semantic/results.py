"""What lookup and store return: small frozen records with a machine-readable reason."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
from numpy.typing import NDArray

from semantic.trace import LookupTrace

# Miss reasons. Validator refusals add two parametrized forms:
# "entity_mismatch:<kind>" and "guarded:<scenario>".
BELOW_THRESHOLD = "below_threshold"
EXPIRED = "expired"
EMPTY = "empty"
# The embedder cannot represent the question (unknown tokens, an uncovered script):
# its vector says nothing about it, so it is never served from, nor stored in, the cache.
UNSUPPORTED_TEXT = "unsupported_text"

# Reasons a response is not stored (besides "guarded:<scenario>").
SKIP_TRUNCATED = "truncated"  # finish_reason "length"
SKIP_REFUSED = "refused"  # finish_reason "content_filter" or a message refusal
SKIP_ERROR = "error"  # an error body, or not a response object at all
SKIP_EMPTY = "empty"  # no choices, or a choice with no text
SKIP_FINISH_PREFIX = "finish_reason"  # "finish_reason:<value>": anything but "stop"


@dataclass(frozen=True)
class LookupResult:
    """A hit (``hit`` True, ``reason`` None) or a miss with exactly one reason.

    ``score`` is the best cosine similarity seen in the partition (``None`` when
    nothing was searched). On a hit ``entry_id``/``answer``/``cached_question``
    describe the served entry; on an ``expired`` or validator miss ``entry_id``
    names the best refused candidate (for misfire review), and ``answer`` is None.
    ``embedding`` is the question's vector when one was computed: pass it back to
    :meth:`SemanticCache.store` to skip a second embedding after a miss, with
    ``partition_key`` to skip hashing the partition again. ``trace`` is the record
    of every step when the lookup was traced (a dry run), else None.
    ``verifier_score`` is the pair verifier's score of the served entry (on a hit)
    or of the best one it refused (on a ``verifier_refused`` miss), when it ran;
    ``verifier_unread`` why it refused that one without reading it (it scored 0:
    ``language_mismatch``, ``too_many_tokens`` …), when the verifier says.
    ``is_pending``: a hit inside the policy's ``pending_band``, not yet counted nor
    served (:meth:`SemanticCache.confirm_hit`).
    """

    hit: bool
    partition_key: str
    reason: str | None = None
    score: float | None = None
    entry_id: int | None = None
    answer: dict[str, Any] | None = None
    cached_question: str | None = None
    expires_at: datetime | None = None
    embedding: NDArray[np.float32] | None = field(default=None, repr=False, compare=False)
    trace: LookupTrace | None = field(default=None, repr=False, compare=False)
    verifier_score: float | None = None
    verifier_unread: str | None = None
    is_pending: bool = False


@dataclass(frozen=True)
class StoreResult:
    """``stored`` True with the entry id (``created`` False: an existing entry was
    updated), or ``stored`` False with the reason the answer was not cached."""

    stored: bool
    partition_key: str
    entry_id: int | None = None
    created: bool = False
    reason: str | None = None
