"""bench/verifier_llm_judge.py: the budgeted cut, the resumable score cache, and a run
from cached judge scores against the real shipped verifier (the 1.1 GB judge itself
is not installed by ``make test``; its scores are what the cache holds)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from bench import train_verifier_zh
from bench import verifier_llm_judge as bench
from bench import verifier_pairs_topics as topics
from bench.train_verifier import training_set
from bench.verifier_pairs import VPair, save
from tests.bench.test_verifier_pairs_zh import _bigrams
from validators.verifier import PairVerifier


def test_kept_at_budget_serves_at_most_the_budget_of_negatives() -> None:
    labels = np.array([0] * 200 + [1] * 4)
    negatives = np.linspace(0.0, 1.0, 200)
    scores = np.concatenate([negatives, [0.999, 0.996, 0.5, 0.1]])
    row = bench.kept_at_budget(labels, scores, 0.01)
    # 1% of 200 negatives: the two highest pass, the third-highest is the cut.
    assert row["served"] == 0.01
    assert row["cut"] == pytest.approx(negatives[-3])
    assert row["kept"] == 0.5  # 0.999 and 0.996 are above it, 0.5 and 0.1 are not
    # Control: with no budget the cut is the highest negative and neither passes it.
    none = bench.kept_at_budget(labels, scores, 0.0)
    assert none["served"] == 0.0 and none["kept"] == 0.0


class CountingJudge:
    """Scores a pair by its lengths, and counts what it was asked (the cache's test)."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    def scores(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        self.asked += pairs
        return [len(a) / (len(a) + len(b)) for a, b in pairs]


def pair(a: str, b: str, label: int, kind: str = "paraphrase", split: str = "eval") -> VPair:
    return VPair(a=a, b=b, label=label, kind=kind, lang="en", split=split, source="test")


def test_judge_all_resumes_from_its_cache(tmp_path: Path) -> None:
    cache = tmp_path / "judge.jsonl"
    pairs = [pair(f"question {i}", "another question", i % 2) for i in range(5)]
    first = CountingJudge()
    out = bench.judge_all(first, pairs[:3], cache, batch=2, deadline=float("inf"))  # type: ignore[arg-type]
    assert len(first.asked) == 3 and len(out) == 3
    second = CountingJudge()
    out = bench.judge_all(second, pairs, cache, batch=2, deadline=float("inf"))  # type: ignore[arg-type]
    assert second.asked == [(p.a, p.b) for p in pairs[3:]]  # only what the cache lacked
    assert out[(pairs[0].a, pairs[0].b)] == pytest.approx(10 / 26)
    assert len(cache.read_text(encoding="utf-8").splitlines()) == 5
    # Without a judge, missing scores stop the run instead of being skipped silently.
    with pytest.raises(SystemExit):
        bench.judge_all(None, [*pairs, pair("new", "pair", 1)], cache, 2, float("inf"))


def test_main_from_cached_scores_compares_with_the_shipped_verifier(tmp_path: Path) -> None:
    texts = [
        ("How do I reset my PIN?", "how can I change my PIN number", 1),
        ("my card has not arrived", "when will my new card be delivered", 1),
        ("what is the exchange rate for euros", "euro exchange rate today", 1),
        ("How do I top up my account?", "why did my top up fail?", 0),
        ("How do I freeze my card?", "how do I order a new card", 0),
        ("can I get a refund", "how long does a transfer take", 0),
    ]
    pairs = [pair(a, b, y, "paraphrase" if y else "hard") for a, b, y in texts]
    save(pairs, tmp_path / "pairs.jsonl")
    cache = tmp_path / "judge.jsonl"
    # The cached judge agrees with the labels, so its AUC is 1 whatever the verifier does.
    with cache.open("w", encoding="utf-8") as f:
        for p in pairs:
            f.write(json.dumps({"a": p.a, "b": p.b, "p": 0.9 if p.label else 0.2}) + "\n")
    out = tmp_path / "result.json"
    argv = ["--pairs", str(tmp_path / "pairs.jsonl"), "--cache", str(cache), "--out", str(out)]
    assert bench.main([*argv, "--langs", "en"]) == 0
    en = json.loads(out.read_text(encoding="utf-8"))["by_lang"]["en"]
    assert (en["positives"], en["negatives"]) == (3, 3)
    assert en["judge"]["auc"] == 1.0
    # The verifier's column is the shipped verifier's own ranking of the same pairs.
    scores = [
        v.score
        for v in PairVerifier(dtype="float32").verdicts_for_pairs([(a, b) for a, b, _ in texts])
    ]
    want = roc_auc_score([y for _, _, y in texts], scores)
    assert en["verifier"]["auc"] == pytest.approx(want, abs=1e-4)
    # Control: a language with no pairs gives no row at all.
    assert bench.main([*argv, "--langs", "zh"]) == 0
    assert json.loads(out.read_text(encoding="utf-8"))["by_lang"] == {}


def train_pairs() -> list[VPair]:
    out = [
        pair(f"how do I do thing {i}", f"doing thing {i}", 1, "paraphrase", "train")
        for i in range(6)
    ]
    out += [pair(f"how do I do thing {i}", f"undo thing {i}", 0, "hard", "train") for i in range(6)]
    out += [pair(f"thing {i}", f"weather {i}", 0, "unrelated", "train") for i in range(3)]
    return out


CAPS = {"paraphrase": 4, "hard": 3}
KINDS = {"paraphrase", "hard"}


def judged_for_training(pairs: list[VPair], seed: int) -> list[VPair]:
    return bench.choose_pairs(
        pairs, "train", per_kind=1, seed=seed, caps=CAPS, langs={"en"}, kinds=KINDS
    )


def test_the_train_split_judges_what_training_draws_kinds_taking_turns() -> None:
    pairs = train_pairs()
    chosen = judged_for_training(pairs, 7)
    drawn = [p for p in training_set(pairs, 7, CAPS) if p.kind in KINDS]
    assert sorted(chosen, key=str) == sorted(drawn, key=str)
    # Taking turns: a run cut after any prefix has judged both kinds about alike.
    assert [p.kind for p in chosen] == ["hard", "paraphrase"] * 3 + ["paraphrase"]
    # Control: another seed draws other pairs (what the trainer's warning is for).
    assert sorted(judged_for_training(pairs, 8), key=str) != sorted(chosen, key=str)


def test_a_train_split_run_fills_the_cache_and_writes_no_report(tmp_path: Path) -> None:
    pairs = train_pairs()
    save(pairs, tmp_path / "pairs.jsonl")
    cache = tmp_path / "judge_train.jsonl"
    with cache.open("w", encoding="utf-8") as f:
        for p in pairs:
            f.write(json.dumps({"a": p.a, "b": p.b, "p": 0.5}) + "\n")
    out = tmp_path / "report.json"
    argv = ["--pairs", str(tmp_path / "pairs.jsonl"), "--cache", str(cache), "--out", str(out)]
    assert bench.main([*argv, "--split", "train", "--langs", "en"]) == 0
    assert not out.exists()
    # Control: the eval split of the same file (none here) does write its report.
    assert bench.main([*argv, "--langs", "en"]) == 0
    assert json.loads(out.read_text(encoding="utf-8"))["by_lang"] == {}


TOPIC_ROWS = [
    ("账户", "改密码", ["怎么修改登录密码", "如何更改我的登录密码"]),
    ("账户", "注销", ["怎么注销账户", "如何关闭我的账户"]),
    ("退款", "退款时间", ["退款多久到账", "退款什么时候到"]),
    ("退款", "退货时间", ["退货要多久", "退货处理时间"]),
]


@pytest.fixture
def small_topic_pool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Chinese topic pool as four intents, its neighbours found by character
    bigrams: the real pool is 5,000 questions through e5."""
    path = tmp_path / "zh_topics.jsonl"
    rows = [
        json.dumps({"cluster": c, "intent": i, "questions": q}, ensure_ascii=False)
        for c, i, q in TOPIC_ROWS
    ]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    monkeypatch.setitem(topics.TOPICS, "zh", path)
    monkeypatch.setattr(topics, "default_embed", lambda lang: _bigrams)


def zh_pair(i: int, label: int, kind: str, source: str) -> VPair:
    return VPair(f"问题{i}{source}", f"答案{i}{kind}", label, kind, "zh", "train", source)


def trained_on(
    pairs: list[VPair], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *extra: str
) -> list[VPair]:
    """What bench/train_verifier_zh.py --topics --seed 3 would train on."""
    seen: list[VPair] = []

    def capture(model: object, chosen: list[VPair], cfg: object, targets: dict) -> dict:
        seen.extend(chosen)
        raise SystemExit("drawn")

    monkeypatch.setattr("bench.train_verifier.load_or_build_pairs", lambda path, rebuild: pairs)
    monkeypatch.setattr(train_verifier_zh, "build", lambda layers: object())
    monkeypatch.setattr(train_verifier_zh, "train", capture)
    argv = ["--out", str(tmp_path / "out"), "--topics", "--seed", "3", *extra]
    with pytest.raises(SystemExit, match="drawn"):
        train_verifier_zh.main(argv)
    return seen


@pytest.mark.usefixtures("small_topic_pool")
def test_the_train_zh_split_judges_what_the_chinese_trainer_trains_on(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pairs = [
        zh_pair(i, label, kind, source)
        for i in range(5)
        for label, kind in ((1, "paraphrase"), (0, "hard"), (0, "polarity"))
        for source in ("banking77-zh", "banking77-zhw")
    ]
    pairs += [
        pair(f"how do I do thing {i}", f"doing thing {i}", 1, "paraphrase", "train")
        for i in range(4)
    ]

    def judged(langs: set[str], seed: int = 3) -> list[VPair]:
        return bench.choose_pairs(
            pairs, "train-zh", per_kind=1, seed=seed, caps={}, langs=langs, kinds=KINDS
        )

    everything = judged({"zh", "zhw", "topics", "en"})
    # Exactly the Chinese pairs of those kinds that training sees, with or without its
    # English sample (the English draw comes after the Chinese one and is not judged).
    for extra in ((), ("--no-english",)):
        trained = trained_on(pairs, monkeypatch, tmp_path, *extra)
        want = [p for p in trained if p.lang == "zh" and p.kind in KINDS]
        assert sorted(everything, key=str) == sorted(want, key=str)
    assert {p.source for p in everything} == {"banking77-zh", "banking77-zhw", "topics-zh"}
    # --langs picks a group: the written questions are one, the topic pool another.
    written = judged({"zhw", "topics"})
    assert {p.source for p in written} == {"banking77-zhw", "topics-zh"}
    assert sum(p.source == "banking77-zhw" for p in written) == 10
    # Control: the translated group is what "zh" picks, and nothing else.
    assert {p.source for p in judged({"zh"})} == {"banking77-zh"}
