"""bench/verifier_zh_compare.py: each language's row counts what the model's own cut
serves, and a language without pairs has no row."""

from __future__ import annotations

import pytest

from bench.verifier_pairs import VPair
from bench.verifier_zh_compare import compare
from validators.verifier import MODEL_DIR, PairVerifier


def test_rows_count_what_the_models_own_cut_serves() -> None:
    texts = [
        ("ATM把我的卡吞了怎么办", "自动取款机吞了我的卡，该怎么办？", 1, "paraphrase"),
        ("我的卡丢了怎么办", "银行卡丢失了该怎么处理", 1, "paraphrase"),
        # a paraphrase filed as a hard negative: served, so the negative and hard
        # masks are seen to count something (a wrong mask would miss it)
        ("怎么修改登录密码", "如何更改我的登录密码", 0, "hard"),
        ("你们几点开门几点关门", "如何开具发票", 0, "hard"),
        ("转账要多久到账", "转账手续费是多少", 0, "polarity"),
    ]
    pairs = [VPair(a, b, label, kind, "zh", "eval", "test") for a, b, label, kind in texts]
    rows = compare(pairs, MODEL_DIR)
    assert set(rows) == {"zh"}  # no pair written in Chinese (zhw), so no row for it
    verifier = PairVerifier(MODEL_DIR)
    cut = verifier.cut_for(0.01)
    scores = [v.score for v in verifier.verdicts_for_pairs([(p.a, p.b) for p in pairs])]
    row = rows["zh"]
    assert row["cut"] == pytest.approx(cut, abs=1e-6)
    assert row["kept"] == pytest.approx(sum(s > cut for s in scores[:2]) / 2, abs=1e-4)
    assert row["misfire"] == pytest.approx(sum(s > cut for s in scores[2:]) / 3, abs=1e-4)
    assert row["hard"] == pytest.approx(sum(s > cut for s in scores[2:4]) / 2, abs=1e-4)
    assert row["misfire"] > 0 and row["hard"] > 0
    assert 0.0 <= row["auc"] <= 1.0
