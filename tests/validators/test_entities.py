"""The Entities / compare_entities API: serialization, kinds, ordering."""

from __future__ import annotations

import json

import pytest

from validators import (
    ENTITIES_VERSION,
    ENTITY_KINDS,
    Entities,
    EntityComparison,
    InvalidEntitiesError,
    StaleEntitiesError,
    UnknownEntityKindError,
    compare_entities,
    extract_entities,
)

RICH = (
    "On 2024-03-05 at 3pm, can I not send $20 (5% fee) for order #12345 from iOS 10 "
    "to a@b.com via https://example.com or +1 555-123-4567 in 2023 with 3 cards in euros? "
    "Tell Alice the distance in miles in Japanese, in all caps."
)


def test_entity_kinds_constant() -> None:
    assert ENTITY_KINDS == (
        "amount", "currency", "percentage", "date", "time", "year", "version", "identifier",
        "email", "url", "phone", "number", "unit", "language", "instruction", "name",
        "polarity",
    )  # fmt: skip


def test_every_kind_in_one_text() -> None:
    entities = extract_entities(RICH)
    assert tuple(entities) == ENTITY_KINDS
    assert entities["amount"] == {"USD:20"}
    # "Japanese" is the language asked for and, as a demonym, a nationality too (both
    # refuse only against another one)
    assert entities["polarity"] == {"negative", "direction:+", "citizen:japan"}
    assert entities["number"] == {"3"}


def test_json_round_trip_is_lossless() -> None:
    entities = extract_entities(RICH)
    data = json.loads(json.dumps(entities.to_dict()))
    assert data["_v"] == ENTITIES_VERSION
    assert data["amount"] == ["USD:20"]
    restored = Entities.from_dict(data)
    assert restored == entities
    assert hash(restored) == hash(entities)
    assert compare_entities(restored, extract_entities(RICH)).matches


def test_entities_are_an_immutable_mapping() -> None:
    entities = Entities({"number": ["3", "3"], "amount": [], "polarity": ["positive"]})
    assert dict(entities) == {"number": frozenset({"3"}), "polarity": frozenset({"positive"})}
    assert "amount" not in entities
    assert entities.values_of("amount") == frozenset()
    with pytest.raises(AttributeError):
        entities._data = {}
    with pytest.raises(UnknownEntityKindError):
        Entities({"colour": ["red"]})
    with pytest.raises(UnknownEntityKindError):
        entities.values_of("colour")
    assert "number=['3']" in repr(entities)


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"number": ["3"], "polarity": ["positive"]}, StaleEntitiesError),  # no version
        ({"_v": ENTITIES_VERSION + 1, "polarity": ["positive"]}, StaleEntitiesError),
        (
            {"_v": ENTITIES_VERSION, "colour": ["red"], "polarity": ["positive"]},
            InvalidEntitiesError,
        ),
        ({"_v": ENTITIES_VERSION, "number": "3", "polarity": ["positive"]}, InvalidEntitiesError),
        ({"_v": ENTITIES_VERSION, "number": [3], "polarity": ["positive"]}, InvalidEntitiesError),
        ({"_v": ENTITIES_VERSION, "number": ["3"]}, InvalidEntitiesError),  # no polarity
        ({"_v": ENTITIES_VERSION, "polarity": ["sideways"]}, InvalidEntitiesError),
        (["number", "3"], InvalidEntitiesError),
        (None, InvalidEntitiesError),
    ],
)
def test_from_dict_rejects_bad_data(data: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        Entities.from_dict(data)


def test_a_kind_present_on_one_side_only_refuses() -> None:
    a = extract_entities("What's the weather today?")
    b = extract_entities("What's the weather?")
    comparison = compare_entities(a, b)
    assert comparison.verdict("date") == "mismatch"
    assert compare_entities(b, a).mismatch_kind == "date"


def test_verdicts_and_mismatch_order() -> None:
    a = extract_entities("Send $20 on March 5 for order 12345")
    b = extract_entities("Send $25 on March 6 for order 12346")
    comparison = compare_entities(a, b)
    assert isinstance(comparison, EntityComparison)
    assert comparison.mismatches == ("amount", "date", "identifier")
    assert comparison.mismatch_kind == "amount"
    assert not comparison.matches
    assert comparison.verdict("email") == "absent"
    assert comparison.verdict("polarity") == "match"
    data = comparison.to_dict()
    assert data["mismatch_kind"] == "amount"
    assert data["kinds"]["amount"] == {
        "verdict": "mismatch",
        "left": ["USD:20"],
        "right": ["USD:25"],
    }
    assert json.loads(json.dumps(data)) == data


def test_kinds_selects_what_is_compared() -> None:
    a = extract_entities("Send $20 on March 5")
    b = extract_entities("Send $25 on March 6")
    assert compare_entities(a, b, kinds=["date", "amount"]).mismatch_kind == "amount"
    assert compare_entities(a, b, kinds={"date"}).mismatch_kind == "date"
    assert compare_entities(a, b, kinds=["email"]).matches
    assert compare_entities(a, b, kinds="date").mismatch_kind == "date"
    only = compare_entities(a, b, kinds=["date"])
    assert [v.kind for v in only.verdicts] == ["date"]
    with pytest.raises(UnknownEntityKindError):
        only.verdict("amount")
    with pytest.raises(UnknownEntityKindError, match="colour"):
        compare_entities(a, b, kinds=["colour"])


def test_plain_mappings_are_accepted() -> None:
    a = {"number": ["3"], "polarity": ["positive"]}
    assert compare_entities(a, {"number": {"3"}, "polarity": {"positive"}}).matches
    assert (
        compare_entities(a, {"number": ["4"], "polarity": ["positive"]}).mismatch_kind == "number"
    )


def test_extraction_is_deterministic() -> None:
    assert extract_entities(RICH) == extract_entities(RICH)
    assert extract_entities(RICH).to_dict() == extract_entities(RICH).to_dict()
