"""The pair verifier on the hit path (issue 12; seed 003 降级：命中后仍走一次轻量校验).

After the index has found candidates above the retrieval threshold and the
entity validator has accepted them, a verifier scores, in one batch over those
candidates, "do the new question and the cached one have the same correct
answer?". A candidate is served only when its score is above the policy's
``verifier_cut`` (:class:`semantic.policy.SemanticPolicy`); the gateway turns a
tenant's target misfire rate into that cut.

``semantic`` must not import ``validators``: the gateway passes an object that
satisfies :class:`HitVerifier` (``gateway/verification.py`` wraps the shipped
``validators.verifier.PairVerifier``; it also offers ``remembered``, the scores
it knows without a forward, for lookups answered from memory). :func:`verify` is
the one place that calls it, and it fails closed: any exception, a wrong number of scores or a
score outside [0, 1] is reported as ``verifier_error`` on every candidate, never
a hit. A policy with a cut but no verifier is ``verifier_unavailable``.

A verifier may also offer ``unread_reason_known(question, candidate, scope) -> str |
None``: why it refused a pair without reading it (another language, too long …),
answered only from what it already knows (no forward). :func:`unread_reason` asks it
for the best refused candidate of a miss that scored 0, so the gateway can count
such misses by why.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from semantic.errors import WouldBlockError

logger = logging.getLogger(__name__)

#: The verifier scored the candidate at or below the cut.
VERIFIER_REFUSED = "verifier_refused"
#: The verifier raised or answered nonsense: never a hit.
VERIFIER_ERROR = "verifier_error"
#: The policy asks for verification and the cache has no verifier.
VERIFIER_UNAVAILABLE = "verifier_unavailable"


@runtime_checkable
class HitVerifier(Protocol):
    """Scores (new question, cached question) pairs."""

    def scores(self, question: str, candidates: Sequence[str], scope: str = "") -> list[float]:
        """One score in [0, 1] per candidate: how likely the two questions have the
        same correct answer (0 for a pair the verifier cannot read). May raise.

        ``scope`` is the partition the candidates come from (it names the tenant):
        a verifier that remembers scores must keep them per scope, or the speed of
        an answer would tell one tenant what another asked."""
        ...


def verify(
    verifier: HitVerifier | None,
    question: str,
    candidates: Sequence[str],
    scope: str = "",
    *,
    local_only: bool = False,
) -> tuple[list[float] | None, str | None]:
    """``(scores, None)``, or ``(None, reason)`` when the candidates must all be
    refused because no trustworthy score exists (see the module docstring).

    ``local_only``: only scores the verifier already knows (its optional
    ``remembered(question, candidates, scope) -> list[float] | None``); a
    :class:`~semantic.errors.WouldBlockError` when one would need a forward."""
    if verifier is None:
        return None, VERIFIER_UNAVAILABLE
    try:
        if local_only:
            remembered = getattr(verifier, "remembered", None)
            known = None if remembered is None else remembered(question, list(candidates), scope)
            if known is None:
                raise WouldBlockError("the verifier must run a forward", reason="verifier")
            scores = [float(s) for s in known]
        else:
            scores = [float(s) for s in verifier.scores(question, list(candidates), scope)]
    except WouldBlockError:
        raise
    except Exception as exc:  # fail closed: whatever went wrong, this is not a hit
        # The exception's type only: its message may quote the question.
        logger.warning("semantic: the verifier failed (%s); treated as a miss", type(exc).__name__)
        return None, VERIFIER_ERROR
    if len(scores) != len(candidates) or not all(
        math.isfinite(s) and 0.0 <= s <= 1.0 for s in scores
    ):
        logger.warning("semantic: the verifier returned unusable scores; treated as a miss")
        return None, VERIFIER_ERROR
    return scores, None


def unread_reason(
    verifier: HitVerifier | None, question: str, candidate: str, scope: str = ""
) -> str | None:
    """Why ``verifier`` refused the pair unread, when it offers that without a forward
    (``unread_reason_known``); None when it read the pair, cannot say, or fails."""
    known = getattr(verifier, "unread_reason_known", None)
    if known is None:
        return None
    try:
        reason = known(question, candidate, scope)
    except Exception as exc:  # a label for a counter: never worth failing a lookup
        logger.warning("semantic: the verifier's unread reason failed (%s)", type(exc).__name__)
        return None
    return reason if isinstance(reason, str) else None
