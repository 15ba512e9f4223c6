"""``Validator``: what the gateway hands to the semantic cache.

The semantic cache calls, per partition policy:

* ``guard(question, guards)`` before searching: ``"guarded:<scenario>"`` or None;
* ``extract(question)`` when storing an entry: a JSON-serialisable dict to
  persist with it;
* ``check(question, cached_question, cached_entities, score, kinds, guards)``
  on the best candidate above the threshold: None (serve the hit) or the miss
  reason, exactly one of ``"guarded:<scenario>"``,
  ``"entity_mismatch:<kind>"`` or ``"judge_refused"``.

Order inside ``check``: guards on the new question, then entities, then the
judge (only when one is configured and ``score`` lies in its band): the cheap,
deterministic checks run first, the model call last.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from typing import Any

from validators.asked_for import asks_for_other, narrows_choice
from validators.counts import swapped_counts
from validators.entities import Entities, compare_entities, entity_scope, extract_entities
from validators.errors import InvalidEntitiesError, InvalidJudgeBandError, InvalidScoreError
from validators.guards import first_guard
from validators.judge import Judge, JudgeBand
from validators.roles_zh import swapped_roles

JUDGE_REFUSED = "judge_refused"


class Validator:
    """Stateless apart from its optional judge; safe to share between threads
    as long as the judge is.

    The judge is consulted only for scores inside ``judge_band``; a judge
    without a band is never consulted (the gateway keeps one judge and binds a
    tenant's band per request with ``with_judge_band``); a band without a judge
    is a configuration error."""

    def __init__(self, *, judge: Judge | None = None, judge_band: JudgeBand | None = None) -> None:
        if judge_band is not None and judge is None:
            raise InvalidJudgeBandError("a judge band needs a judge")
        if judge_band is not None and not isinstance(judge_band, JudgeBand):
            raise InvalidJudgeBandError(f"judge_band must be a JudgeBand, not {judge_band!r}")
        self.judge = judge
        self.judge_band = judge_band

    def with_judge_band(self, band: JudgeBand | None) -> Validator:
        """The same validator and judge with another band (None: no judging)."""
        return Validator(judge=self.judge, judge_band=band)

    def extract(self, text: object, *, scope: str = "") -> dict[str, Any]:
        """Entities of ``text`` to store with a cache entry (``Entities.to_dict``).

        ``scope`` (here and on ``guard`` and ``check``): the caller's partition; the
        analyses cached for it are never reused by calls of another scope."""
        with entity_scope(scope):
            return extract_entities(text).to_dict()

    def guard(self, question: object, guards: Collection[str], *, scope: str = "") -> str | None:
        """``"guarded:<scenario>"`` when one of ``guards`` fires on the question."""
        with entity_scope(scope):
            match = first_guard(question, guards)
        return None if match is None else match.reason

    def check(
        self,
        question: object,
        cached_question: object,
        cached_entities: Mapping[str, Any] | None,
        score: float,
        kinds: Collection[str] | None = None,
        guards: Collection[str] = (),
        *,
        scope: str = "",
    ) -> str | None:
        """None when the cached answer may be served for ``question``.

        ``cached_entities`` is what ``extract`` returned at store time; when it
        is None, malformed or written by other extraction rules, the entities
        are re-extracted from ``cached_question``. ``kinds`` limits the entity
        kinds compared (None: all). Raises ``InvalidTextError`` for bad text,
        ``InvalidScoreError`` for a non-finite score, ``UnknownEntityKindError``
        / ``UnknownGuardError`` for unknown names."""
        if (
            isinstance(score, bool)
            or not isinstance(score, int | float)
            or not math.isfinite(score)
        ):
            raise InvalidScoreError(f"score must be a finite number, got {score!r}")
        reason = self.guard(question, guards, scope=scope)
        if reason is not None:
            return reason
        with entity_scope(scope):
            new = extract_entities(question)
            old = self._cached(cached_question, cached_entities)
        comparison = compare_entities(new, old, kinds)
        if comparison.mismatch_kind is not None:
            return f"entity_mismatch:{comparison.mismatch_kind}"
        refused = pair_mismatch(question, cached_question, kinds)
        if refused is not None:
            return f"entity_mismatch:{refused[0]}"
        if (
            self.judge is not None
            and self.judge_band is not None
            and self.judge_band.applies(score)
        ):
            if not isinstance(question, str) or not isinstance(cached_question, str):
                question, cached_question = _as_str(question), _as_str(cached_question)
            if not self.judge.same_answer(question, cached_question).same:
                return JUDGE_REFUSED
        return None

    @staticmethod
    def _cached(cached_question: object, cached_entities: Mapping[str, Any] | None) -> Entities:
        if cached_entities is not None:
            try:
                return Entities.from_dict(cached_entities)
            except InvalidEntitiesError:
                pass  # stale or corrupt: the question text is the ground truth
        return extract_entities(cached_question)


#: Checks that read the two texts together, beside the entities each one holds: (the
#: entity kind a tenant switches them with, the check's name, the check).
PAIR_CHECKS = (
    # 咖啡比茶健康吗 / 茶比咖啡健康吗: the same words, the parties exchanged
    ("polarity", "swapped_roles", swapped_roles),
    # "When is the next bus to the airport?" / "Where is …": what is asked for (session 49)
    ("polarity", "asks_for_other", asks_for_other),
    # "Is coffee or tea healthier?" / "Is tea healthier?": one option of a choice
    ("polarity", "narrows_choice", narrows_choice),
    # "two cards on one account" / "one card on two accounts": the counts swapped
    ("number", "swapped_counts", swapped_counts),
)


def pair_mismatch(
    question: object, cached_question: object, kinds: Collection[str] | None = None
) -> tuple[str, str] | None:
    """The first pair check that tells the two texts apart: (its entity kind, its
    name); None when none does (the entity kinds compared, ``kinds``: None for all)."""
    a, b = _as_str(question), _as_str(cached_question)
    for kind, name, check in PAIR_CHECKS:
        if (kinds is None or kind in kinds) and check(a, b):
            return kind, name
    return None


def _as_str(text: object) -> str:
    return bytes(text).decode("utf-8") if isinstance(text, bytes | bytearray) else str(text)
