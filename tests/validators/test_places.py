"""Places in any case (validators/places.py): lower-case countries and states, and the
acronyms US (in capitals) / UK / EU, as polarity values refused only when both texts
name places and not the same ones; one place in other spellings is one value."""

from __future__ import annotations

import pytest

from validators import compare_entities, extract_entities
from validators.places import find_places, place_values


def same_answer(a: str, b: str) -> bool:
    return compare_entities(extract_entities(a), extract_entities(b)).matches


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("how long does a divorce take in england?", "how long does a divorce take in scotland?"),
        ("statute of limitations for fraud in ontario?", "statute of limitations in quebec?"),
        ("What is the legal drinking age in the US?", "What is the legal drinking age in the UK?"),
        ("Does the policy apply to stores in the EU?", "Does it apply to stores in the US?"),
        ("do i need a visa for japan", "do i need a visa for mexico"),
        ("sales tax in new york", "sales tax in new jersey"),
    ],
)
def test_another_place_is_refused(a: str, b: str) -> None:
    assert not same_answer(a, b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("do you ship to canada", "Do you ship to Canada?"),
        ("How do I get to New York?", "how do i get to new york"),
        ("Can I use my card in the U.S.?", "Can I use my card in the USA?"),
        ("Drinking age in the US?", "Drinking age in the United States?"),
        ("Can you help us?", "Can you help me?"),  # "us", the pronoun
        ("Do you ship to the Netherlands?", "do you ship to holland"),
        ("the role of the federal reserve in the u.s. economy", "its role in the U.S. economy"),
        # one-sided: BANKING77 labels them one intent
        ("When can I expect my card? I live in the US.", "When can I expect my card?"),
    ],
)
def test_one_place_in_other_spellings_is_one_name(a: str, b: str) -> None:
    assert same_answer(a, b)


def test_found_places_carry_their_ids_and_spans() -> None:
    text = "Flights from New York to the UK"
    assert [(p, text[s:e]) for p, s, e in find_places(text)] == [
        ("new york", "New York"),
        ("uk", "UK"),
    ]


# Session 39: cities, Chinese names, "outside", routes (validators/place_names.py)
@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("what is the weather in london?", "what is the weather in paris?"),
        ("best restaurants in new york city", "best restaurants in chicago"),
        ("我可以在美国使用这张卡吗？", "我可以在英国使用这张卡吗？"),
        ("北京的天气怎么样", "上海的天气怎么样"),
        ("Do you ship to the EU?", "Do you ship outside the EU?"),
        ("Do you have stores in the US?", "Do you have stores outside the US?"),
        ("Is shipping free for non-EU orders?", "Is shipping free for EU orders?"),
        ("美国以外能用这张卡吗", "美国能用这张卡吗"),
        ("Flights from New York to Florida", "Flights from Florida to New York"),
        (
            "How much is shipping from the US to Canada?",
            "How much is shipping from Canada to the US?",
        ),
        ("从北京到上海的高铁多少钱", "从上海到北京的高铁多少钱"),
        ("从美国寄到英国要多久", "从英国寄到美国要多久"),
        (
            "Katz was born in Sweden and moved to New York City at the age of 1.",
            "Katz was born in New York and moved to Sweden at the age of 1.",
        ),
    ],
)
def test_another_city_side_or_direction_is_refused(a: str, b: str) -> None:
    assert not same_answer(a, b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("best restaurants in new york city", "best restaurants in nyc"),
        ("restaurants in new york", "restaurants in NYC"),
        ("flights to delhi", "flights to new delhi"),
        ("museums in washington dc", "museums in Washington D.C."),
        ("hotels in paris, france", "hotels in paris"),
        ("Is Austin, Texas expensive to live in?", "Is austin expensive to live in?"),
        ("Flights from New York to Florida", "Flights to Florida from New York"),
        ("time difference between london and paris", "time difference between paris and london"),
        ("Can I use my card outside the US?", "Can I use my card abroad?"),  # one-sided
        ("美国能用这张卡吗", "这张卡在美国能用吗"),
        ("从北京到上海的高铁多少钱", "北京到上海高铁票价"),
        ("I'm in Canada, can I send money to the US?", "Can I send money to the US from Canada?"),
        ("去日本需要签证吗？", "请问中国公民前往日本需要办理签证吗？"),  # a nationality, no place
        # 到 completing a verb (收到, 找到) names what was got, not where to (session 50)
        ("收到美国寄来的包裹要交税吗", "从美国寄来的包裹要交税吗"),
        ("收到日本寄来的快递要交关税吗", "从日本寄来的快递要交关税吗"),
        ("我能收到国外的汇款吗", "可以从国外给我汇款吗"),
    ],
)
def test_one_city_or_route_in_other_words_is_served(a: str, b: str) -> None:
    assert same_answer(a, b)


def test_to_completing_a_verb_names_no_destination() -> None:
    assert "route:to:us" not in place_values("收到美国寄来的包裹")
    assert "route:to:us" in place_values("把包裹寄到美国")  # the controls
    assert "route:to:us" in place_values("我想到美国留学")  # 想 + 到美国: still a destination


def test_a_capitalised_city_is_still_a_name() -> None:
    # one-sided, as before cities were places: "the time in London" is not "the time"
    assert not same_answer("What time is it in London?", "What time is it?")
    assert same_answer("what time is it in london?", "what time is it")  # one-sided place


def test_place_values_name_outside_and_route() -> None:
    from validators.places import known_place_value, place_values

    values = place_values("Shipping from Canada to the EU, or outside the US?")
    assert values == {
        "place:canada", "place:eu", "place:outside:us", "route:from:canada", "route:to:eu"
    }  # fmt: skip
    assert place_values("从美国寄到英国") == {
        "place:us", "place:uk", "route:from:us", "route:to:uk"
    }  # fmt: skip
    assert place_values("中国公民去日本需要签证吗") == {
        "place:japan", "route:to:japan", "citizen:china"
    }  # fmt: skip
    assert all(known_place_value(v) for v in values)
    assert not known_place_value("route:via:canada")
    assert not known_place_value("place:outside:atlantis")


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("do americans need a visa for japan", "do canadians need a visa for japan", False),
        ("中国公民去日本需要签证吗", "美国公民去日本需要签证吗", False),
        ("is there a good chinese restaurant nearby", "is there a good italian restaurant nearby",
         False),
        ("do americans need a visa for japan", "do americans need a visa to visit japan", True),
        ("can i get a card as a european", "do you give cards to europeans", True),
        ("how do i say thank you in french", "how do i say thanks in french", True),
        # one-sided: a nationality on one side only is no contrast
        ("去日本需要签证吗", "中国公民去日本需要签证吗", True),
    ],
)  # fmt: skip
def test_nationalities_refuse_only_on_both_sides(a: str, b: str, same: bool) -> None:
    assert same_answer(a, b) is same


def test_a_nationality_is_not_a_place() -> None:
    from validators.places import citizen_values, known_place_value, place_values

    assert citizen_values("美国人呢") == {"citizen:us"}
    assert citizen_values("a south african passport, 美国护照") == {
        "citizen:south africa", "citizen:us"
    }  # fmt: skip
    values = place_values("中国公民去日本")
    assert values == {"place:japan", "route:to:japan", "citizen:china"}
    assert all(known_place_value(v) for v in values)
