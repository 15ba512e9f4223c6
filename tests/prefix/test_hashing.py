"""Block identity: canonical serialization, chain roots, chained block keys (seed 000)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from prefix.hashing import (
    FORMAT_TAG,
    KEY_SIZE,
    ModelFingerprint,
    block_key,
    block_keys,
    canonical_config,
    chain_root,
    lora_extra,
    mm_extra,
    serialize,
    short,
    validate_extras,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
FP = ModelFingerprint(
    model_id="m", weights_digest="d", dtype="float32", block_size=4, position_config="rope"
)
ROOT = chain_root(FP, "ns", "salt")
TOKENS_13 = list(range(100, 113))


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


# ---- extras ----------------------------------------------------------------


def test_lora_name_never_equals_salt_or_namespace() -> None:
    lora_x = block_keys(chain_root(FP, "", ""), TOKENS_13, 4, extras=[("lora", "X")])
    salt_x = block_keys(chain_root(FP, "", "X"), TOKENS_13, 4)
    namespace_x = block_keys(chain_root(FP, "X", ""), TOKENS_13, 4)
    cache_salt_x = block_keys(chain_root(FP, "", "", cache_salt="X"), TOKENS_13, 4)
    plain = block_keys(chain_root(FP, "", ""), TOKENS_13, 4)
    for a, b in [
        (lora_x, salt_x),
        (lora_x, namespace_x),
        (lora_x, cache_salt_x),
        (lora_x, plain),
        (salt_x, namespace_x),
    ]:
        assert set(a).isdisjoint(b)


def test_extras_boundaries_are_unambiguous() -> None:
    tokens = [1, 2, 3, 4]
    assert block_key(ROOT, tokens, [("lora", "ab"), ("lora", "c")]) != block_key(
        ROOT, tokens, [("lora", "a"), ("lora", "bc")]
    )
    assert block_key(ROOT, tokens, [("mm", "img", 12)]) != block_key(
        ROOT, tokens, [("mm", "img1", 2)]
    )


def test_extras_order_matters() -> None:
    a, b = mm_extra("img-a", 0), mm_extra("img-b", 0)
    assert block_key(ROOT, [1, 2, 3, 4], [a, b]) != block_key(ROOT, [1, 2, 3, 4], [b, a])


def test_same_placeholders_different_image_differ_from_that_block_on() -> None:
    def mm(digest: str) -> list[bytes]:
        return block_keys(
            ROOT, [0] * 12, 4, mm_extras_for_block=lambda i: [("mm", digest, 0)] if i == 1 else []
        )

    a, b = mm("cat"), mm("dog")
    assert a[0] == b[0]
    assert a[1] != b[1]
    assert a[2] != b[2]  # chained: the same tokens after a different image still differ


def test_lora_changes_every_key() -> None:
    base = block_keys(ROOT, TOKENS_13, 4)
    lora = block_keys(ROOT, TOKENS_13, 4, extras=[lora_extra("adapter")])
    assert all(x != y for x, y in zip(base, lora, strict=True))


@pytest.mark.parametrize(
    "bad",
    [
        "lora",
        b"lora",
        ["lora"],
        [["lora", "X"]],
        [("lora",)],
        [("lora", "")],
        [("lora", 3)],
        [("lora", "X", "Y")],
        [("mm", "digest")],
        [("mm", "digest", -1)],
        [("mm", "digest", True)],
        [("mm", "digest", 1.0)],
        [("mm", "", 0)],
        [("gpu", "X")],
        [("gpu", "X", 0)],
        [("LORA", "X")],
        [()],
    ],
)
def test_malformed_extras_are_rejected(bad: object) -> None:
    with pytest.raises(ValueError):
        validate_extras(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        block_key(ROOT, [1, 2, 3, 4], bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        block_keys(ROOT, TOKENS_13, 4, extras=bad)  # type: ignore[arg-type]


def test_extra_constructors_validate() -> None:
    assert lora_extra("a") == ("lora", "a")
    assert mm_extra("d", 3) == ("mm", "d", 3)
    with pytest.raises(ValueError):
        lora_extra("")
    with pytest.raises(ValueError):
        mm_extra("d", -1)


def test_bad_per_block_extras_are_rejected() -> None:
    with pytest.raises(ValueError):
        block_keys(ROOT, TOKENS_13, 4, mm_extras_for_block=lambda i: ["mm"])  # type: ignore[list-item]


# ---- block keys ------------------------------------------------------------


def test_only_full_blocks_get_keys() -> None:
    assert len(block_keys(ROOT, TOKENS_13, 4)) == 3
    assert len(block_keys(ROOT, TOKENS_13[:12], 4)) == 3
    assert block_keys(ROOT, TOKENS_13[:12], 4) == block_keys(ROOT, TOKENS_13, 4)
    assert block_keys(ROOT, TOKENS_13[:3], 4) == []
    assert block_keys(ROOT, [], 4) == []


def test_keys_are_chained() -> None:
    keys = block_keys(ROOT, TOKENS_13, 4)
    parent = ROOT
    for i, key in enumerate(keys):
        assert key == block_key(parent, TOKENS_13[i * 4 : (i + 1) * 4])
        assert len(key) == KEY_SIZE
        parent = key
    assert keys[0].hex() == block_key(ROOT, TOKENS_13[:4]).hex()
    assert block_key(ROOT, [1, 2, 3, 4]).hex() == (
        "c618c7adfb83ce3607f4af7c85b2a04c74e04f3e110a7a94f79c1fbff2b29a78"
    )


def test_list_tuple_and_int_like_tokens_agree() -> None:
    class Tok:
        def __init__(self, v: int) -> None:
            self.v = v

        def __index__(self) -> int:
            return self.v

    keys = block_keys(ROOT, TOKENS_13, 4)
    assert block_keys(ROOT, tuple(TOKENS_13), 4) == keys
    assert block_keys(ROOT, [Tok(t) for t in TOKENS_13], 4) == keys  # type: ignore[misc]
    with pytest.raises(TypeError):
        block_keys(ROOT, [1.0, 2.0, 3.0, 4.0], 4)  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("position", "block_size", "num_reused"),
    [(5, 4, 1), (9, 4, 2), (5, 8, 0), (0, 4, 0), (12, 4, 3)],
)
def test_a_change_invalidates_from_its_block_on(
    position: int, block_size: int, num_reused: int
) -> None:
    # Seed 000's lab: change position 5 → reused=4 (one block); 9 → 8; B=8, position 5 → 0.
    changed = list(TOKENS_13)
    changed[position] = -1
    a = block_keys(ROOT, TOKENS_13, block_size)
    b = block_keys(ROOT, changed, block_size)
    assert a[:num_reused] == b[:num_reused]
    assert all(x != y for x, y in zip(a[num_reused:], b[num_reused:], strict=True))


def test_identical_later_block_still_differs_after_an_earlier_change() -> None:
    a = block_keys(ROOT, [1, 1, 1, 1, 7, 7, 7, 7], 4)
    b = block_keys(ROOT, [2, 2, 2, 2, 7, 7, 7, 7], 4)
    assert a[1] != b[1]


def test_block_key_rejects_bad_parent_and_block_size() -> None:
    with pytest.raises(ValueError):
        block_key(b"short", [1])
    with pytest.raises(ValueError):
        block_key(ROOT.hex(), [1])  # type: ignore[arg-type]
    for bad in (0, -1, True):
        with pytest.raises(ValueError):
            block_keys(ROOT, TOKENS_13, bad)


def test_short_is_12_hex_chars() -> None:
    assert short(ROOT) == ROOT.hex()[:12]
    assert len(short(ROOT)) == 12


_CHILD = """
from prefix.hashing import ModelFingerprint, block_keys, chain_root
fp = ModelFingerprint("m", "d", "float32", 4, "rope")
root = chain_root(fp, "ns", "salt", cache_salt="c")
keys = block_keys(root, list(range(100, 113)), 4, extras=[("lora", "X")],
                  mm_extras_for_block=lambda i: [("mm", "img", i)])
print(root.hex() + " " + " ".join(k.hex() for k in keys))
"""


def test_keys_are_identical_across_processes() -> None:
    root = chain_root(FP, "ns", "salt", cache_salt="c")
    keys = block_keys(
        root,
        TOKENS_13,
        4,
        extras=[("lora", "X")],
        mm_extras_for_block=lambda i: [("mm", "img", i)],
    )
    expected = root.hex() + " " + " ".join(k.hex() for k in keys)
    outputs = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO_ROOT)}
        result = subprocess.run(
            [sys.executable, "-c", _CHILD],
            env=env,
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        outputs.add(result.stdout.strip())
    assert outputs == {expected}
