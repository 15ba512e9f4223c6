"""Block identity: extras (LoRA, multimodal) and chained block keys, identical across
processes (seed 000).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from prefix.core.hashing import (
    KEY_SIZE,
    block_key,
    block_keys,
    chain_root,
    lora_extra,
    mm_extra,
    short,
    validate_extras,
)
from tests.prefix.hashing_support import FP, REPO_ROOT, ROOT, TOKENS_13

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
from prefix.core.hashing import ModelFingerprint, block_keys, chain_root
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
