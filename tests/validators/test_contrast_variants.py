"""Contrast sets of a product's variant and an item's condition
(validators/contrast_variants.py): the pairs session 51's misfire hunt found served
through the defaults (verifier 0.990-0.997) are refused; the same variant in other
words, either order, a text naming none and words that only look like variants (a
manual top-up, the user manual, a digital card, "I used my card") are not."""

from __future__ import annotations

import pytest

from tests.validators.conftest import mismatch
from validators import extract_entities

REFUSED = [
    ("Does the wireless mouse need batteries?", "Does the wired mouse need batteries?"),
    ("Is the cordless vacuum covered by the warranty?", "Is the corded vacuum covered?"),
    ("无线耳机保修多久", "有线耳机保修多久"),
    ("Is the hardcover edition in stock?", "Is the paperback edition in stock?"),
    ("How do I set the time on an analog watch?", "How do I set the time on a digital watch?"),
    ("Is a manual car cheaper to insure?", "Is an automatic car cheaper to insure?"),
    ("手动挡的车好学吗", "自动挡的车好学吗"),
    ("变频空调省电吗", "定频空调省电吗"),
    ("Can I switch from prepaid to a new plan?", "Can I switch from postpaid to a new plan?"),
    ("Can I return an unopened item?", "Can I return a used item?"),
    ("Can I return a used item?", "Can I return a damaged item?"),
    # 二手 holds a numeral: masked from the numbers, read here (before session 51 it was
    # read by neither)
    ("全新的手机可以退吗", "二手的手机可以退吗"),
]

KEPT = [
    ("Is the wireless mouse rechargeable?", "Can I recharge the bluetooth mouse?"),
    ("Is it wired or wireless?", "Is it wireless or wired?"),
    ("Is there an automatic top up feature?", "Do I have to manually top up once I'm too low?"),
    ("Where is the user manual?", "Is there an automatic car wash?"),
    ("Can I add a digital card to my wallet?", "Do you sell analog cameras?"),
    ("I used my card and it was declined", "My brand new card was declined"),
    ("Can I return a damaged item?", "Can I send back a defective product?"),
    ("自动续费怎么关", "手动续费怎么弄"),
]


@pytest.mark.parametrize(("a", "b"), REFUSED)
def test_another_variant_or_condition_is_refused(a: str, b: str) -> None:
    assert mismatch(a, b) == "polarity", (extract_entities(a), extract_entities(b))


@pytest.mark.parametrize(("a", "b"), KEPT)
def test_the_same_variant_or_none_is_kept(a: str, b: str) -> None:
    assert mismatch(a, b) is None, (extract_entities(a), extract_entities(b))
