"""Block identity: canonical serialization, model fingerprints and chain roots (seed 000).
Extras and chained block keys are in test_block_keys.py.
"""

from __future__ import annotations

import dataclasses

import pytest

from prefix.core.hashing import (
    FORMAT_TAG,
    KEY_SIZE,
    block_keys,
    canonical_config,
    chain_root,
    serialize,
)
from tests.prefix.hashing_support import FP, ROOT, TOKENS_13

# ---- serialize -------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (("ab", "c"), ("a", "bc")),
        (None, ""),
        (None, b""),
        (None, 0),
        ("", b""),
        (0, False),
        (1, True),
        (b"x", "x"),
        (("a",), "a"),
        ((("a",),), ("a",)),
        ((), None),
        ((1, 2), (12,)),
        ((1, (2, 3)), ((1, 2), 3)),
        (255, -1),
        (-1, 1),
        (2**64, 0),
        ("é", "e\u0301"),
    ],
)
def test_serialize_distinguishes(a: object, b: object) -> None:
    assert serialize(a) != serialize(b)


def test_serialize_known_bytes() -> None:
    # Locks the format: changing the encoding must come with a new FORMAT_TAG.
    assert FORMAT_TAG == "cachegate-prefix-v1"
    assert serialize(None) == b"N" + bytes(8)
    assert serialize(True) == b"B" + (1).to_bytes(8, "big") + b"\x01"
    assert serialize(-1) == b"I" + (1).to_bytes(8, "big") + b"\xff"
    assert serialize(255) == b"I" + (2).to_bytes(8, "big") + b"\x00\xff"
    length = [n.to_bytes(8, "big") for n in range(22)]
    assert serialize(("ab", "c")) == (
        b"T" + length[21] + b"S" + length[2] + b"ab" + b"S" + length[1] + b"c"
    )


def test_serialize_tuple_and_list_share_a_tag() -> None:
    # Documented: token ids hash the same whether they arrive as a list or a tuple.
    assert serialize([1, [2, "x"]]) == serialize((1, (2, "x")))


def test_serialize_big_and_negative_ints_roundtrip_distinctly() -> None:
    values = [0, 1, -1, 127, 128, -128, -129, 255, 256, 2**63, -(2**63), 2**200, -(2**200)]
    encodings = {serialize(v) for v in values}
    assert len(encodings) == len(values)
    for v in values:
        payload = serialize(v)[9:]
        assert int.from_bytes(payload, "big", signed=True) == v


@pytest.mark.parametrize("bad", [1.0, {"a": 1}, {1}, bytearray(b"x"), object()])
def test_serialize_rejects_unsupported_types(bad: object) -> None:
    with pytest.raises(TypeError):
        serialize(bad)
    with pytest.raises(TypeError):
        serialize(("ok", bad))


# ---- fingerprint and root --------------------------------------------------


@pytest.mark.parametrize(
    "change",
    [
        {"model_id": "m2"},
        {"weights_digest": "d2"},
        {"dtype": "bfloat16"},
        {"block_size": 8},
        {"position_config": "rope;theta=500000"},
    ],
)
def test_every_fingerprint_field_changes_the_root(change: dict[str, object]) -> None:
    other = dataclasses.replace(FP, **change)  # type: ignore[arg-type]
    assert chain_root(other, "ns", "salt") != ROOT


@pytest.mark.parametrize(
    "bad",
    [
        {"model_id": ""},
        {"weights_digest": ""},
        {"dtype": ""},
        {"position_config": ""},
        {"block_size": 0},
        {"block_size": -4},
        {"block_size": True},
        {"block_size": 4.0},
    ],
)
def test_fingerprint_rejects_empty_or_invalid_fields(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        dataclasses.replace(FP, **bad)  # type: ignore[arg-type]


def test_fingerprint_tuple_names_its_fields() -> None:
    assert dict(FP.to_tuple()) == {
        "model_id": "m",
        "weights_digest": "d",
        "dtype": "float32",
        "block_size": 4,
        "position_config": "rope",
    }


def test_canonical_config_ignores_key_order() -> None:
    a = canonical_config({"rope_theta": 10000.0, "max_position_embeddings": 2048})
    b = canonical_config({"max_position_embeddings": 2048, "rope_theta": 10000.0})
    assert a == b
    assert a != canonical_config({"max_position_embeddings": 4096, "rope_theta": 10000.0})


def test_root_is_deterministic_and_32_bytes() -> None:
    assert chain_root(FP, "ns", "salt") == ROOT
    assert len(ROOT) == KEY_SIZE
    assert ROOT.hex() == "e14c00a5f8b6e63b64985ab4bdc889ff82d55051cb0d730d138f0c8087af0e6b"


def test_namespace_and_salt_fields_are_typed() -> None:
    roots = {
        chain_root(FP, "X", "a"),
        chain_root(FP, "a", "X"),
        chain_root(FP, "", "aX"),
        chain_root(FP, "aX", ""),
        chain_root(FP, "a", "", cache_salt="X"),
        chain_root(FP, "", "a", cache_salt="X"),
        chain_root(FP, "X", "", cache_salt="a"),
    }
    assert len(roots) == 7


def test_server_salt_str_is_its_utf8_bytes() -> None:
    assert chain_root(FP, "ns", "sälz") == chain_root(FP, "ns", "sälz".encode())


def test_cache_salt_narrows_and_is_stable() -> None:
    salted = chain_root(FP, "ns", "salt", cache_salt="user-1")
    assert salted != ROOT
    assert salted == chain_root(FP, "ns", "salt", cache_salt="user-1")
    assert salted != chain_root(FP, "ns", "salt", cache_salt="user-2")
    assert chain_root(FP, "ns", "salt", cache_salt="") != ROOT  # None != ""
    # The namespace stays in: the same cache_salt in another namespace is another root.
    assert salted != chain_root(FP, "ns2", "salt", cache_salt="user-1")
    keys = block_keys(salted, TOKENS_13, 4)
    assert keys == block_keys(chain_root(FP, "ns", "salt", cache_salt="user-1"), TOKENS_13, 4)
    assert set(keys).isdisjoint(block_keys(ROOT, TOKENS_13, 4))


def test_chain_root_rejects_wrong_types() -> None:
    with pytest.raises(TypeError):
        chain_root(FP, "ns", 123)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        chain_root(FP, b"ns", "salt")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        chain_root(FP, "ns", "salt", cache_salt=b"x")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        chain_root(FP.to_tuple(), "ns", "salt")  # type: ignore[arg-type]
