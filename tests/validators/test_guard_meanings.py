"""What two guards mean: ``high_risk`` advice about someone's situation, not facts
(seed 003's 医疗、法律建议); ``time_sensitive`` today's state, not a policy that is
the same every day. And the advice rules read a long text in linear time."""

from __future__ import annotations

import time

import pytest

from validators import first_guard


@pytest.mark.parametrize(
    ("text", "refused"),
    [
        ("What are the side effects of aspirin?", False),
        ("How much aspirin should I take for my headache?", True),
        ("阿司匹林有哪些副作用", False),
        ("我头痛应该吃多少阿司匹林", True),
        # session 45's review: a dose for a child, a drug in pregnancy (served before)
        ("What dose of Tylenol is safe for a child?", True),
        ("Can pregnant women take ibuprofen?", True),
        ("孕妇可以吃布洛芬吗？", True),
        ("布洛芬一天最多吃几片", True),
        ("What are common symptoms of flu in children?", False),
        ("Is this toy safe for children?", False),
        ("布洛芬是什么药", False),
    ],
)
def test_high_risk_means_advice_not_facts(text: str, refused: bool) -> None:
    match = first_guard(text, ["high_risk"])
    assert (match is not None) is refused, match


@pytest.mark.parametrize(
    ("text", "refused"),
    [
        ("Is the store open today?", True),  # session 45's review: cached for a day
        ("Are you open tonight?", True),
        ("Is my flight delayed today?", True),
        ("今天营业吗？", True),
        ("What time do you close today?", True),
        ("今天几点关门", True),
        ("What are your opening hours?", False),  # the same answer every day
        ("Are you open on Sundays?", False),
        ("你们几点开门", False),
    ],
)
def test_time_sensitive_means_todays_state(text: str, refused: bool) -> None:
    match = first_guard(text, ["time_sensitive"])
    assert (match is not None) is refused, match


def test_advice_rules_read_a_long_text_in_linear_time() -> None:
    """A term, then a lookahead for a situation marker tried after every term: 20 kB of
    "on my a " took 7 s, 100 kB minutes (the diff review of session 50). Two scans now;
    the bound is loose (the old form took over a hundred times it)."""
    from validators.guards import HIGH_RISK
    from validators.text import prepare

    rules = [r for r in HIGH_RISK.rules if r.name in ("medical", "legal")]
    for text in ("on my a " * 12_000, "how do I see a " * 6_000, "sue " * 24_000):
        started = time.monotonic()
        for rule in rules:
            rule.find(prepare(text))
        assert time.monotonic() - started < 2.0
    # the controls: a term and a marker in either order, and neither alone
    medical = next(r for r in rules if r.name == "medical")
    assert medical.find("What dose of ibuprofen should I take?") is not None
    assert medical.find("I have a headache, what now?") is not None
    assert medical.find("What are the side effects of aspirin?") is None
