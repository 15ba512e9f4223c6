"""The pairs tests/gateway/proxy/test_verifier_hits.py stores and asks through a live
gateway: (id, stored question, asked question, the x-cachegate-semantic it expects)."""

from __future__ import annotations

CASES = [
    (
        "direction_swap",
        # (Celsius to Fahrenheit and back is refused earlier, by the ``unit`` order)
        "How do I move money from my savings account to my checking account?",
        "How do I move money from my checking account to my savings account?",
        "miss:verifier_refused",
    ),
    (
        "word_order_swap",
        "Is a cat bigger than a dog?",
        "Is a dog bigger than a cat?",
        "miss:verifier_refused",
    ),
    (
        # PAWS-X's swap: the verifier refused it before session 39; now the places'
        # route (validators/places.py) does, before the verifier is asked
        "route_swap",
        "Are there cheap flights from New York to Florida?",
        "Are there cheap flights from Florida to New York?",
        "miss:entity_mismatch:polarity",
    ),
    (
        "paraphrase",
        "How do I reset my password?",
        "How can I reset my password?",
        "hit",
    ),
    (
        "entity_change",
        # cosine 0.845, above the retrieval threshold (0.84): the amount refuses it
        "How long does a $100 transfer take?",
        "How long does a $5000 transfer take?",
        "miss:entity_mismatch:",
    ),
    # Pairs the verifier scores above 0.99 that serve a wrong answer: the entity kinds
    # of validators/{names,units,instructions,antonyms}.py refuse them, and a
    # paraphrase that names the same brand in another case is still served.
    (
        "proper_noun_swap",
        "What is the return policy for Nike shoes?",
        "What is the return policy for Adidas shoes?",
        "miss:entity_mismatch:name",
    ),
    (
        "proper_noun_paraphrase",
        "What is the return policy for Nike shoes?",
        "what is the return policy for nike shoes",
        "hit",
    ),
    (
        "unit_swap",
        "How many days does a refund take?",
        "How many hours does a refund take?",
        "miss:entity_mismatch:unit",
    ),
    (
        "answer_format",
        "What is the capital of France?",
        "What is the capital of France? Answer in all caps.",
        "miss:entity_mismatch:instruction",
    ),
    (
        "sentiment_antonym",
        "Classify the sentiment: I love this phone.",
        "Classify the sentiment: I hate this phone.",
        "miss:entity_mismatch:polarity",
    ),
    # session 49's misfire hunt: served at verifier 0.996 before the pair checks
    (
        "asked_for_other",
        "When is the next bus to the airport?",
        "Where is the next bus to the airport?",
        "miss:entity_mismatch:polarity",
    ),
    (
        "count_swap_modifier",
        "Can I have two cards on one bank account?",
        "Can I have one card on two accounts?",
        "miss:entity_mismatch:number",
    ),
    # session 50's misfire hunt: served at verifier 0.995-0.997 before the sets
    (
        "network_setting",
        "How much is a visit to an in-network doctor?",
        "How much is a visit to an out-of-network doctor?",
        "miss:entity_mismatch:polarity",
    ),
    (
        "comparative",
        "How do I make the font bigger?",
        "How do I make the font smaller?",
        "miss:entity_mismatch:polarity",
    ),
    # session 51: served before the sets (cosine 0.878 / 0.976, verifier 0.996 / 0.994)
    (
        "pay_basis",
        "Do hourly employees get overtime?",
        "Do salaried employees get overtime?",
        "miss:entity_mismatch:polarity",
    ),
    (
        "review_roles",
        "Can the reviewer see the author's name?",
        "Can the author see the reviewer's name?",
        "miss:entity_mismatch:polarity",
    ),
    # session 52: served before the rules (verifier 0.996 / 0.989)
    (
        "premises",
        "Can I smoke inside the hotel?",
        "Can I smoke outside the hotel?",
        "miss:entity_mismatch:polarity",
    ),
    (
        "part_of_a_sum",
        "Can I withdraw part of my pension?",
        "Can I withdraw all of my pension?",
        "miss:entity_mismatch:polarity",
    ),
]
