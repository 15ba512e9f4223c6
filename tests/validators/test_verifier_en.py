"""The English cross-encoder on its own (validators/verifier_en.py): what it reads,
what it refuses, and a forward that does not depend on the batch around a pair."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from validators.verifier import MODEL_DIR
from validators.verifier_en import FORWARD_CHUNK, EnglishModel
from validators.verifier_errors import VerifierModelError

PAIRS = [
    ("How do I reset my card PIN?", "how can I change my PIN"),
    ("hi", "My transfer has not arrived yet after three days, what should I do about it?"),
    ("what is the exchange rate for euros today", "euro exchange rate"),
]


def meta() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((MODEL_DIR / "verifier.json").read_text())
    return loaded


@pytest.fixture(scope="module")
def english() -> EnglishModel:
    return EnglishModel(MODEL_DIR, meta(), dtype="float32", backend_setting="torch", threads=1)


def test_encode_reads_both_texts_whole(english: EnglishModel) -> None:
    long_b = "please tell me " * 100  # far past max_tokens: kept whole, refused later
    (ids, types), (long_ids, _) = english.encode([PAIRS[0], ("hi", long_b)])
    assert len(ids) == len(types) and set(types) == {0, 1}
    assert ids[0] == english.tokenizer.cls_token_id and ids[-1] == english.tokenizer.sep_token_id
    assert len(long_ids) > english.max_tokens


def test_unreadable_names_its_reason(english: EnglishModel) -> None:
    readable = english.encode([PAIRS[0]])[0]
    assert english.unreadable(*readable) is None  # positive control
    too_long = english.encode([("hi", "please tell me " * 100)])[0]
    assert english.unreadable(*too_long) == "too_many_tokens"
    # One side all [UNK]: the query is unreadable even though the candidate is fine.
    unk = english.tokenizer.unk_token_id
    ids, types = readable
    masked = tuple(
        unk if t == 0 and i not in english.tokenizer.all_special_ids else i
        for i, t in zip(ids, types, strict=True)
    )
    assert english.unreadable(masked, types) == "unknown_tokens"


def test_a_pairs_logit_does_not_depend_on_its_batch(english: EnglishModel) -> None:
    rows = english.encode(PAIRS * 4)  # more rows than one chunk, of different lengths
    assert len(rows) > FORWARD_CHUNK
    batched = english.forward_rows(rows)
    alone = [english.forward([row])[0] for row in rows]
    assert batched == pytest.approx(alone, abs=1e-4)
    assert batched[:3] == pytest.approx(batched[3:6], abs=1e-6)  # same pair, same logit
    assert len(set(round(z, 3) for z in alone[:3])) == 3  # distinct pairs, distinct logits


def test_weights_that_fail_their_checksum_are_refused(tmp_path: Path) -> None:
    wrong = {**meta(), "weights_sha256": "0" * 64}
    with pytest.raises(VerifierModelError, match="checksum"):
        EnglishModel(MODEL_DIR, wrong, dtype="float32", backend_setting="torch", threads=1)
    with pytest.raises(VerifierModelError, match="cannot load"):
        EnglishModel(tmp_path, meta(), dtype="float32", backend_setting="torch", threads=1)


def test_the_onnx_backend_refuses_bfloat16() -> None:
    with pytest.raises(VerifierModelError, match="does not compute bfloat16"):
        EnglishModel(MODEL_DIR, meta(), dtype="bfloat16", backend_setting="onnx", threads=1)
