"""Versions, identifiers, emails, URLs and phone numbers."""

from __future__ import annotations

import pytest

from tests.validators.conftest import mismatch
from validators import extract_entities, find_entities

SAME = [
    ("How do I fix error 0x80070005?", "How can I fix error 0X80070005?"),
    ("What does 0xff mean?", "What does 0xFF mean?"),
    ("Where is order 12345?", "Where is order #12345?"),
    ("Where is order 12345?", "What's the status of order number 12345?"),
    ("Where is order 12345?", "订单号12345到哪了"),
    ("Where is order 12345?", "订单号：12345到哪了"),
    ("Track 1Z999AA10123456784", "Where is package 1z999aa10123456784"),
    ("Is SKU ABC-123 in stock?", "Is sku abc123 in stock?"),
    ("what can you tell me about flight dl123", "where is flight DL123"),
    ("card ending in 1234", "card with the last four digits 1234"),
    ("card ending in 1234", "尾号1234的卡"),
    ("Does iOS 10 support it?", "Does iOS version 10 support it?"),
    ("Does iOS 10 support it?", "Does ios10 support it?"),
    ("Does Python 3.11 support it?", "Does python version 3.11 support it?"),
    ("Is v2.3.1 out?", "Is version 2.3.1 out?"),
    ("Is v2.3.1 out?", "版本2.3.1发布了吗"),
    ("Does node.js 18 work?", "Does nodejs 18 work?"),
    ("Email me at John.Doe@Example.com", "Send it to john.doe@example.com"),
    ("Open https://www.example.com/help/", "Open example.com/help"),
    ("Open https://example.com/help", "Open http://example.com/help"),
    ("Call +1 555-123-4567", "Call (555) 123-4567"),
    ("Call +1 555-123-4567", "Call 555.123.4567"),
    ("Call 1-800-555-1234", "Call 800-555-1234"),
    ("打138-1234-5678", "打13812345678"),
    ("打138-1234-5678", "Call +86 138 1234 5678"),
    ("My IBAN is GB82 WEST 1234 5698 7654 32", "My IBAN is GB82WEST12345698765432"),
    ("card 4111 1111 1111 1111", "card 4111-1111-1111-1111"),
]

DIFFERENT = [
    ("How do I fix error 0x80070005?", "How do I fix error 0x80070002?", "identifier"),
    ("What does error 0x80004005 mean?", "What does error 0x8007000E mean?", "identifier"),
    ("Where is order 12345?", "Where is order 12346?", "identifier"),
    ("Where is order #12345?", "Where is order #12346?", "identifier"),
    ("订单号12345到哪了", "订单号12346到哪了", "identifier"),
    ("Where is order 12345?", "Where is my order?", "identifier"),
    ("Track 1Z999AA10123456784", "Track 1Z999AA10123456785", "identifier"),
    ("Is SKU ABC-123 in stock?", "Is SKU ABC-124 in stock?", "identifier"),
    ("card ending in 1234", "card ending in 4321", "identifier"),
    ("account 12345678", "account 12345679", "identifier"),
    ("Does iOS 10 support it?", "Does iOS 11 support it?", "version"),
    ("Does iOS 10 support it?", "Does Android 10 support it?", "version"),
    ("Does Python 3.11 support it?", "Does Python 3.12 support it?", "version"),
    ("Is v2.3.1 out?", "Is v2.3.2 out?", "version"),
    ("Is version 5 out?", "Is version 6 out?", "version"),
    ("安卓10能用吗", "安卓11能用吗", "version"),
    ("Email me at john@example.com", "Email me at jane@example.com", "email"),
    ("Open example.com/help", "Open example.com/faq", "url"),
    ("Open https://example.com", "Open https://example.org", "url"),
    ("Call +1 555-123-4567", "Call +1 555-123-4568", "phone"),
    ("Call +1 555-123-4567", "Call +44 555-123-4567", "phone"),
    ("打138-1234-5678", "打139-1234-5678", "phone"),
    (
        "My IBAN is GB82 WEST 1234 5698 7654 32",
        "My IBAN is GB82 WEST 1234 5698 7654 33",
        "identifier",
    ),
]


@pytest.mark.parametrize(("a", "b"), SAME)
def test_same_object_agrees(a: str, b: str) -> None:
    assert mismatch(a, b) is None, (extract_entities(a), extract_entities(b))


@pytest.mark.parametrize(("a", "b", "kind"), DIFFERENT)
def test_different_object_refuses(a: str, b: str, kind: str) -> None:
    assert mismatch(a, b) == kind, (extract_entities(a), extract_entities(b))


@pytest.mark.parametrize(
    ("text", "kind", "values"),
    [
        ("order 12345", "identifier", {"12345"}),
        ("1Z999AA10123456784", "identifier", {"1Z999AA10123456784"}),
        ("ip 192.168.1.10", "identifier", {"IP:192.168.1.10"}),
        ("iOS 10", "version", {"ios:10"}),
        ("Python 3.11", "version", {"python:3.11"}),
        ("v2.3.1", "version", {"v:2.3.1"}),
        ("GPT-4o", "version", {"gpt:4o"}),
        ("Mail A.B@Example.COM.", "email", {"a.b@example.com"}),
        ("see https://Example.com/Path?x=1.", "url", {"example.com/Path?x=1"}),
        ("访问baidu.com", "url", {"baidu.com"}),
        ("+44 20 7946 0958", "phone", {"+442079460958"}),
    ],
)
def test_canonical_values(text: str, kind: str, values: set[str]) -> None:
    assert extract_entities(text)[kind] == values


def test_short_keyword_numbers_are_quantities_not_ids() -> None:
    entities = extract_entities("I'd like to order 500 checks")
    assert "identifier" not in entities
    assert entities["number"] == {"500"}
    assert "identifier" not in extract_entities("the account 1000 dollars")


def test_spans_point_at_the_text() -> None:
    text = "Email a@b.com about order #12345 on 2024-03-05"
    spans = find_entities(text)
    assert [(s.kind, s.text) for s in spans] == [
        ("email", "a@b.com"),
        ("identifier", "order #12345"),
        ("date", "2024-03-05"),
    ]
    assert all(text[s.start : s.end] == s.text for s in spans)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("What is the fee for account type A?", "What is the fee for account type B?"),
        ("Where is gate C?", "Where is gate D?"),
        ("Is plan A cheaper?", "Is plan B cheaper?"),
        ("Which foods have vitamin C?", "Which foods have vitamin D?"),
        ("What does grade A+ mean?", "What does grade A mean?"),
        # session 44's review: served each other's answers before
        ("What is the range of the Tesla Model S?", "What is the range of the Tesla Model X?"),
        ("Who directed Star Wars Episode IV?", "Who directed Star Wars Episode V?"),
    ],
)
def test_a_different_lettered_variant_refuses(a: str, b: str) -> None:
    assert mismatch(a, b) == "identifier", (extract_entities(a), extract_entities(b))


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("What is the fee for account type A?", "How much does a type A account cost?"),
        ("Which foods have vitamin C?", "What food is high in Vitamin C?"),
        # lower case and the pronoun "I" are no variants
        ("How do I type a password?", "How can I enter a password?"),
        ("Which plan I should choose?", "Which plan should I choose?"),
        ("What is the range of the Tesla Model S?", "How far can a Tesla Model S go?"),
        ("Which model I should buy?", "Which model should I buy?"),
        ("Is type II diabetes curable?", "Can type 2 diabetes be cured?"),  # Roman = digit
    ],
)
def test_the_same_lettered_variant_or_none_matches(a: str, b: str) -> None:
    assert mismatch(a, b) is None, (extract_entities(a), extract_entities(b))


def test_lettered_values_keep_their_word() -> None:
    assert extract_entities("account type A")["identifier"] == {"TYPE:A"}
    assert extract_entities("Type II diabetes")["number"] == {"2"}  # as "type 2" reads
    assert mismatch("What is type I diabetes?", "What is type II diabetes?") == "number"
    # letter+digit codes stay identifiers of their own shape
    assert extract_entities("gate B12")["identifier"] == {"B12"}
