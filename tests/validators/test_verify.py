"""Validator: the object the semantic cache receives."""

from __future__ import annotations

import math

import pytest

from validators import (
    InvalidJudgeBandError,
    InvalidScoreError,
    JudgeBand,
    JudgeVerdict,
    LocalModelJudge,
    UnknownEntityKindError,
    UnknownGuardError,
    Validator,
)


def test_true_paraphrase_is_served() -> None:
    v = Validator()
    stored = v.extract("How do I reset my password?")
    assert (
        v.check("How can I reset my password?", "How do I reset my password?", stored, 0.95) is None
    )
    assert v.check("今天天气怎么样", "今天天气如何", v.extract("今天天气如何"), 0.9) is None
    assert v.check("I'd like to send 20 dollars", "I want to transfer $20", None, 0.9) is None


@pytest.mark.parametrize(
    ("new", "cached", "reason"),
    [
        ("Where is order 12346?", "Where is order 12345?", "entity_mismatch:identifier"),
        ("明天天气如何", "今天天气如何", "entity_mismatch:date"),
        ("How do I disable 2FA?", "How do I enable 2FA?", "entity_mismatch:polarity"),
        ("Does iOS 11 support it?", "Does iOS 10 support it?", "entity_mismatch:version"),
        ("Meet at 4pm", "Meet at 3pm", "entity_mismatch:time"),
        ("Send $25", "Send $20", "entity_mismatch:amount"),
        ("Is the rate 6%?", "Is the rate 5%?", "entity_mismatch:percentage"),
        ("Is it open next week?", "Is it open last week?", "entity_mismatch:date"),
        ("Email jane@example.com", "Email john@example.com", "entity_mismatch:email"),
        ("Open example.com/b", "Open example.com/a", "entity_mismatch:url"),
        ("Call 555-123-4568", "Call 555-123-4567", "entity_mismatch:phone"),
        ("inflation in 2024", "inflation in 2023", "entity_mismatch:year"),
        ("buy 3 tickets", "buy 4 tickets", "entity_mismatch:number"),
    ],
)
def test_refusals_name_the_kind(new: str, cached: str, reason: str) -> None:
    v = Validator()
    assert v.check(new, cached, v.extract(cached), 0.97) == reason
    assert v.check(new, cached, None, 0.97) == reason


def test_guards_are_checked_on_the_new_question_first() -> None:
    v = Validator()
    assert v.guard("What's the stock price now?", ["time_sensitive"]) == "guarded:time_sensitive"
    assert v.guard("What's the stock price now?", ["high_risk"]) is None
    assert v.guard("我的订单到哪了", ["personalized", "high_risk"]) == "guarded:personalized"
    reason = v.check("明天天气如何", "今天天气如何", None, 0.99, None, ["time_sensitive"])
    assert reason == "guarded:time_sensitive"
    # the guard looks at the new question only
    assert v.check("How do I reset my password?", "password reset today's news", None, 0.9,
                   kinds=["number"], guards=["time_sensitive"]) is None  # fmt: skip
    with pytest.raises(UnknownGuardError):
        v.guard("hello", ["nope"])


def test_kinds_limit_the_comparison() -> None:
    v = Validator()
    assert v.check("Send $25", "Send $20", None, 0.9, kinds=["date"]) is None
    assert v.check("Send $25", "Send $20", None, 0.9, kinds=["amount"]) == "entity_mismatch:amount"
    with pytest.raises(UnknownEntityKindError):
        v.check("Send $25", "Send $20", None, 0.9, kinds=["money"])


def test_stale_or_corrupt_stored_entities_are_re_extracted() -> None:
    v = Validator()
    stale = {"number": ["4"], "polarity": ["positive"]}  # no version: another rule set
    assert v.check("buy 3 tickets", "buy 3 tickets", stale, 0.9) is None
    corrupt = {"_v": 1, "number": "3"}
    assert v.check("buy 3 tickets", "buy 4 tickets", corrupt, 0.9) == "entity_mismatch:number"
    # a valid stored dict is trusted (it is what was extracted at store time)
    assert v.check("buy 3 tickets", "buy 3 tickets", v.extract("buy 4 tickets"), 0.9) == (
        "entity_mismatch:number"
    )


@pytest.mark.parametrize("score", [math.nan, math.inf, -math.inf, "0.9", None, True])
def test_invalid_scores(score: object) -> None:
    with pytest.raises(InvalidScoreError):
        Validator().check("a question", "a question", None, score)  # type: ignore[arg-type]


class CountingJudge:
    """A real Judge implementation that says "same" only for identical texts."""

    def __init__(self) -> None:
        self.calls = 0

    def same_answer(self, q1: str, q2: str) -> JudgeVerdict:
        self.calls += 1
        return JudgeVerdict(q1 == q2, "equal" if q1 == q2 else "different")


def test_judge_only_inside_its_band_and_only_after_entities_agree() -> None:
    judge = CountingJudge()
    v = Validator(judge=judge, judge_band=JudgeBand(0.85, 0.92))
    paraphrase = ("How can I reset my password?", "How do I reset my password?")
    assert v.check(*paraphrase, None, 0.95) is None  # above the band: no judge
    assert v.check(*paraphrase, None, 0.90) == "judge_refused"
    assert v.check(paraphrase[1], paraphrase[1], None, 0.90) is None
    assert judge.calls == 2
    assert v.check("Send $25", "Send $20", None, 0.90) == "entity_mismatch:amount"
    assert judge.calls == 2  # entities refused first; no model call


def test_local_model_judge_plugs_in() -> None:
    v = Validator(judge=LocalModelJudge(lambda prompt: "no"), judge_band=JudgeBand(0.8, 0.9))
    assert v.check("How can I reset my password?", "How do I reset my password?", None, 0.85) == (
        "judge_refused"
    )
    v = Validator(judge=LocalModelJudge(lambda prompt: "Yes."), judge_band=JudgeBand(0.8, 0.9))
    assert (
        v.check("How can I reset my password?", "How do I reset my password?", None, 0.85) is None
    )


def test_judge_band_is_bound_per_tenant() -> None:
    judge = CountingJudge()
    base = Validator(judge=judge)  # no band: the judge is never consulted
    paraphrase = ("How can I reset my password?", "How do I reset my password?")
    assert base.check(*paraphrase, None, 0.9) is None
    assert judge.calls == 0
    tenant = base.with_judge_band(JudgeBand(0.85, 0.95))
    assert tenant.judge is judge
    assert tenant.check(*paraphrase, None, 0.9) == "judge_refused"
    assert judge.calls == 1
    assert tenant.with_judge_band(None).check(*paraphrase, None, 0.9) is None
    with pytest.raises(InvalidJudgeBandError):
        Validator(judge_band=JudgeBand(0.8, 0.9))
    with pytest.raises(InvalidJudgeBandError):
        Validator(judge=judge, judge_band=(0.8, 0.9))  # type: ignore[arg-type]


def test_cached_analyses_are_never_shared_between_scopes() -> None:
    # One tenant must not learn from the speed of an analysis (~1 ms, or µs when
    # cached) that another tenant's partition asked the same text a moment ago.
    from validators.entities import _analyse_cached

    validator, text = Validator(), "Can I transfer $250 to account 4411 on 3 May?"
    validator.extract(text, scope="tenant:a")
    before = _analyse_cached.cache_info()
    validator.check(text, "Send $250 to 4411 on May 3?", None, 0.95, scope="tenant:b")
    validator.guard(text, ["personalized"], scope="tenant:c")
    after = _analyse_cached.cache_info()
    assert after.hits == before.hits  # another scope: analysed afresh, never a hit
    # Positive control: the same scope reuses its own analyses.
    validator.check(text, "Send $250 to 4411 on May 3?", None, 0.95, scope="tenant:a")
    assert _analyse_cached.cache_info().hits > after.hits
