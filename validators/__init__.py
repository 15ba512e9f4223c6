"""validators: entity checks, scenario guards and an optional judge for the
semantic cache (issue 4; seed 003 正确性风险 / 缓解手段 / 不该用语义缓存的场景).

A semantic hit is only served when the new question and the cached one agree
on every entity that changes the answer (numbers, amounts, percentages, dates
and relative days, times, years, versions, identifiers, emails, URLs, phone
numbers, negation and action polarity), no guard the tenant's policy selects
fires on the new question, and, when configured, a judge model agrees.

This package imports nothing from ``gateway``, ``semantic`` or ``prefix``, and
no torch: the gateway passes a ``Validator`` to the semantic cache, and a
``LocalModelJudge`` gets the local model as a plain ``generate`` callable.

Entry points: ``Validator`` (what the cache calls), ``extract_entities`` /
``compare_entities`` / ``Entities`` / ``ENTITY_KINDS``, ``GUARDS`` /
``first_guard``, ``Judge`` / ``JudgeBand`` / ``LocalModelJudge``, and the errors
in ``validators.errors``.
"""

from validators.entities import (
    ENTITIES_VERSION,
    ENTITY_KINDS,
    Entities,
    EntityComparison,
    KindVerdict,
    compare_entities,
    extract_entities,
    find_entities,
)
from validators.errors import (
    EmptyTextError,
    InvalidEntitiesError,
    InvalidJudgeBandError,
    InvalidScoreError,
    InvalidTextError,
    InvalidUTF8Error,
    StaleEntitiesError,
    TextTooLongError,
    TextTypeError,
    UnknownEntityKindError,
    UnknownGuardError,
    ValidatorError,
)
from validators.guards import GUARDS, Guard, GuardMatch, GuardRule, first_guard
from validators.judge import Judge, JudgeBand, JudgeVerdict, LocalModelJudge, parse_yes_no
from validators.scan import EntitySpan
from validators.text import MAX_TEXT_CHARS, prepare
from validators.verify import JUDGE_REFUSED, Validator, pair_mismatch

__all__ = [
    "ENTITIES_VERSION",
    "ENTITY_KINDS",
    "GUARDS",
    "JUDGE_REFUSED",
    "MAX_TEXT_CHARS",
    "EmptyTextError",
    "Entities",
    "EntityComparison",
    "EntitySpan",
    "Guard",
    "GuardMatch",
    "GuardRule",
    "InvalidEntitiesError",
    "InvalidJudgeBandError",
    "InvalidScoreError",
    "InvalidTextError",
    "InvalidUTF8Error",
    "Judge",
    "JudgeBand",
    "JudgeVerdict",
    "KindVerdict",
    "LocalModelJudge",
    "StaleEntitiesError",
    "TextTooLongError",
    "TextTypeError",
    "UnknownEntityKindError",
    "UnknownGuardError",
    "Validator",
    "ValidatorError",
    "compare_entities",
    "extract_entities",
    "find_entities",
    "first_guard",
    "pair_mismatch",
    "parse_yes_no",
    "prepare",
]
