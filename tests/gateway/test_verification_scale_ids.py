"""One score scale per language (gateway/verification.py ``GatewayVerifier``): a
labelled sample refines a tenant's cut only while the model that scored it is in
force, and a retrain of one language's model leaves the other's labels counting.

The real shipped verifier; a "retrain" is the same model with another weights hash
(or another map onto the common scale), which is all the ids read. Real migrated
SQLite for the labels and the sampler."""

from __future__ import annotations

import asyncio
import copy
import hashlib
import threading
from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from gateway.admin.service import TenantAdmin
from gateway.calibration_labels import count_uncounted_labels, load_labels
from gateway.calibrator import Calibrator
from gateway.models import MisfireSample
from gateway.review.api import list_samples
from gateway.review.retag import retag_legacy_samples
from gateway.review.sampling import MisfireSampler
from gateway.tenants import TenantStore, utc_now
from gateway.verification import GatewayVerifier, load_verifier
from tests.gateway.review.test_sample_tenant_gone import hit
from tests.gateway.test_calibration import migrated, sample

EN_PAIR = ("How do I reset my password?", "I forgot my password, what should I do?")
ZH_PAIR = ("怎么修改登录密码", "如何更改我的登录密码")


@pytest.fixture(scope="module")
def verifier() -> GatewayVerifier:
    return load_verifier(dtype="float32")


def retrained(verifier: GatewayVerifier, *, en: bool = False, zh: bool = False) -> GatewayVerifier:
    """The verifier as it would load after retraining one language's model."""
    model = copy.copy(verifier.model)
    if en:
        model.meta = {**model.meta, "weights_sha256": "e" * 64}
    if zh:
        assert model.zh_path is not None
        model.zh_path = copy.copy(model.zh_path)
        model.zh_path.weights_sha256 = "f" * 64
    return GatewayVerifier(model)


def test_each_language_has_its_own_id_and_a_retrain_moves_only_its_own(
    verifier: GatewayVerifier,
) -> None:
    en_id, zh_id = verifier.en_scale_id, verifier.zh_scale_id
    assert zh_id is not None and len({en_id, zh_id, verifier.legacy_scale_id}) == 3
    assert set(verifier.scale_ids) == {en_id, zh_id, verifier.legacy_scale_id}
    assert GatewayVerifier(verifier.model).scale_ids == verifier.scale_ids  # stable
    zh_retrained = retrained(verifier, zh=True)
    assert zh_retrained.en_scale_id == en_id and zh_retrained.zh_scale_id != zh_id
    en_retrained = retrained(verifier, en=True)
    assert en_retrained.en_scale_id != en_id
    # English weights alone (a map that came out the same) leave Chinese scores as
    # they were: the Chinese id stays.
    assert en_retrained.zh_scale_id == zh_id
    # A real English retrain refits the Chinese map onto the common scale, which moves
    # Chinese scores though the Chinese weights stayed: another Chinese id.
    model = copy.copy(verifier.model)
    assert model.zh_path is not None
    model.zh_path = copy.copy(model.zh_path)
    scale = model.zh_path.float32_scale
    model.zh_path.float32_scale = {**scale, "y": [min(1.0, y + 0.01) for y in scale["y"]]}
    assert GatewayVerifier(model).zh_scale_id != zh_id
    assert GatewayVerifier(model).en_scale_id == en_id


def test_the_legacy_id_is_the_one_id_samples_were_stored_under_before(
    verifier: GatewayVerifier,
) -> None:
    # Before: sha256 of "<English weights>[:int8.N]:<Chinese weights>", 16 hex digits.
    model = verifier.model
    assert model.zh_path is not None
    weights = f"{model.meta['weights_sha256']}:{model.zh_path.weights_sha256}"
    assert verifier.legacy_scale_id == hashlib.sha256(weights.encode()).hexdigest()[:16]
    assert retrained(verifier, zh=True).legacy_scale_id != verifier.legacy_scale_id


def test_each_pair_is_tagged_with_the_scale_of_the_model_that_reads_it(
    verifier: GatewayVerifier,
) -> None:
    assert verifier.scale_id_of(*EN_PAIR) == verifier.en_scale_id
    assert verifier.scale_id_of(*ZH_PAIR) == verifier.zh_scale_id
    assert verifier.scale_id_of("パスワードを変更するには", "パスワードの変更方法") is None
    ids = {"en": verifier.en_scale_id, "zh": verifier.zh_scale_id, "": None}
    mixed = ("How do I change my login password?", ZH_PAIR[0])
    for pair in (EN_PAIR, ZH_PAIR, mixed, ("パスワードを変更するには", "パスワードの変更方法")):
        (verdict,) = verifier.model.verdicts(pair[0], [pair[1]])  # the path that scored
        assert verifier.scale_id_of(*pair) == ids[verdict.path], pair


def test_a_chinese_retrain_keeps_english_labels_refining_the_cut(
    tmp_path: Path, verifier: GatewayVerifier
) -> None:
    db = migrated(tmp_path)
    now = utc_now()
    en_id, zh_id = verifier.en_scale_id, verifier.zh_scale_id
    with Session(db) as s, s.begin():
        for i in range(400):  # English labels: enough to confirm the tenant's cut
            s.add(sample("t", 0.6 + 0.001 * i, "correct", now, model=en_id))
        for _ in range(40):
            s.add(sample("t", 0.99, "correct", now, model=zh_id))
        for _ in range(20):  # pre-session-35 samples of today's weights
            s.add(sample("t", 0.99, "correct", now, model=verifier.legacy_scale_id))
    now_in_force = Calibrator(db, lambda t: 0.5, verifier_models=verifier.scale_ids)
    assert now_in_force.refresh("t", 0.01).labelled == 460  # positive control: all count
    after_zh = retrained(verifier, zh=True)
    cut = Calibrator(db, lambda t: 0.5, verifier_models=after_zh.scale_ids).refresh("t", 0.01)
    assert (cut.source, cut.labelled) == ("tenant", 400)  # the English ones still count
    after_en = retrained(verifier, en=True)  # its map came out the same (see above)
    cut = Calibrator(db, lambda t: 0.5, verifier_models=after_en.scale_ids).refresh("t", 0.01)
    assert cut.labelled == 40  # only the Chinese ones: too few to confirm anything
    assert cut.source == "shipped"
    db.dispose()


def test_an_exact_repeat_is_stored_with_no_scale(tmp_path: Path, verifier: GatewayVerifier) -> None:
    """An exact repeat is served at 1.0 without the verifier (semantic/candidates.py):
    its label, a stale answer say, says nothing of the verifier's scale. Stored with the
    English scale, 3 such misfires raised a tenant's cut to 1.0, serving nothing (a
    review, session 40); now it moves no cut, and is still reviewed."""
    db = migrated(tmp_path)
    store = TenantStore(db)
    TenantAdmin(store, None, None).add_tenant("tests", "acme", None)
    sampler = MisfireSampler(db, upstream=None, embedder=None, scale_of=verifier.scale_id_of)  # type: ignore[arg-type]
    served = hit("acme", store.namespace_id("acme"))
    repeat = replace(
        served, question=EN_PAIR[0], matched_question=EN_PAIR[0].lower(), verifier_score=1.0
    )
    scored = replace(served, question=EN_PAIR[0], matched_question=EN_PAIR[1], verifier_score=1.0)
    for h in (repeat, scored):
        asyncio.run(sampler._process(h))
    with Session(db) as s:
        found = select(MisfireSample.matched_question, MisfireSample.verifier_model)
        rows = {q: model for q, model in s.execute(found)}
    assert rows[EN_PAIR[0].lower()] is None
    assert rows[EN_PAIR[1]] == verifier.en_scale_id  # the control: a pair the model read
    db.dispose()


def test_the_sampler_stores_the_scale_of_the_language_that_scored(
    tmp_path: Path, verifier: GatewayVerifier
) -> None:
    db = migrated(tmp_path)
    store = TenantStore(db)
    TenantAdmin(store, None, None).add_tenant("tests", "acme", None)
    sampler = MisfireSampler(db, upstream=None, embedder=None, scale_of=verifier.scale_id_of)  # type: ignore[arg-type]
    served = hit("acme", store.namespace_id("acme"))
    english = replace(served, question=EN_PAIR[0], matched_question=EN_PAIR[1], verifier_score=0.99)
    chinese = replace(served, question=ZH_PAIR[0], matched_question=ZH_PAIR[1], verifier_score=0.99)
    unscored = replace(served, question=EN_PAIR[0], matched_question=EN_PAIR[1])
    for h in (english, chinese, unscored):
        asyncio.run(sampler._process(h))
    with Session(db) as s:
        stored = dict(s.execute(select(MisfireSample.question, MisfireSample.verifier_model)).all())
        rows = s.execute(select(MisfireSample.verifier_model)).scalars().all()
    assert stored[ZH_PAIR[0]] == verifier.zh_scale_id
    assert sorted(rows, key=str) == sorted(
        [verifier.en_scale_id, verifier.zh_scale_id, None], key=str
    )
    db.dispose()


def test_the_review_list_says_which_samples_count_for_the_cut(
    tmp_path: Path, verifier: GatewayVerifier
) -> None:
    db = migrated(tmp_path)
    now = utc_now()
    kinds = {
        "english": (0.9, verifier.en_scale_id),
        "chinese": (0.9, verifier.zh_scale_id),
        "before 35": (0.9, verifier.legacy_scale_id),
        "retrained": (0.9, "0123456789abcdef"),  # another model's scale
        "no model": (0.9, None),  # before migration 0008
        "exact repeat": (1.0, None),  # served at 1.0, read by no model (sampling.py)
        "no score": (None, verifier.en_scale_id),
        "not a probability": (float("inf"), verifier.en_scale_id),
    }
    with Session(db) as s, s.begin():
        for name, (score, model) in kinds.items():
            row = sample("t", score, None, now, model=model)
            row.question = name
            s.add(row)
    sessions = sessionmaker(db, expire_on_commit=False)
    listed = list_samples(sessions, "t", "all", 50, None, verifier.scale_ids)
    refines = {x.question: x.refines_cut for x in listed.data}
    assert refines == {
        "english": True,
        "chinese": True,
        "before 35": True,
        "retrained": False,
        "no model": False,
        "exact repeat": False,
        "no score": False,
        "not a probability": False,
    }
    # The same rule as the cut's own read: labelled, exactly these count.
    with Session(db) as s, s.begin():
        for row in s.scalars(select(MisfireSample)):
            row.label = "correct"
    counted = Calibrator(db, lambda t: 0.5, verifier_models=verifier.scale_ids)
    assert counted.refresh("t", 0.01).labelled == 3
    # The report's footnote: labels of models not in force ("retrained", "no model");
    # not an exact repeat's (before session 44 every labelled repeat counted there).
    assert count_uncounted_labels(db, "t", verifier.scale_ids) == 2
    assert count_uncounted_labels(db, "t", [*verifier.scale_ids, "0123456789abcdef"]) == 1
    assert count_uncounted_labels(db, "another tenant", verifier.scale_ids) == 0
    # With the verifier off there is no cut to count for.
    off = list_samples(sessions, "t", "all", 50, None, None)
    assert {x.refines_cut for x in off.data} == {None}
    db.dispose()


def test_a_pair_whose_scale_cannot_be_told_is_sampled_without_one(tmp_path: Path) -> None:
    db = migrated(tmp_path)
    store = TenantStore(db)
    TenantAdmin(store, None, None).add_tenant("tests", "acme", None)

    def broken(question: str, matched: str, scope: str) -> str | None:
        raise RuntimeError("the language reader failed")

    sampler = MisfireSampler(db, upstream=None, embedder=None, scale_of=broken)  # type: ignore[arg-type]
    served = replace(hit("acme", store.namespace_id("acme")), verifier_score=0.99)
    asyncio.run(sampler._process(served))
    with Session(db) as s:
        (row,) = s.scalars(select(MisfireSample)).all()
    assert (row.verifier_score, row.verifier_model) == (0.99, None)  # kept, counts for no cut
    assert sampler.samples.labels("written")._value.get() == 1
    db.dispose()


def test_old_samples_are_retagged_with_their_languages_scale(
    tmp_path: Path, verifier: GatewayVerifier
) -> None:
    db = migrated(tmp_path)
    now = utc_now()
    legacy = verifier.legacy_scale_id
    rows = {  # question -> (matched question, id stored)
        EN_PAIR[0]: (EN_PAIR[1], legacy),
        ZH_PAIR[0]: (ZH_PAIR[1], legacy),
        "パスワードを変更するには": ("パスワードの変更方法", legacy),  # neither model reads it
        "What is my balance?": ("What's my balance?", "0123456789abcdef"),  # other weights
        "How do I close my account?": ("How can I close my account?", verifier.en_scale_id),
    }
    with Session(db) as s, s.begin():
        for question, (matched, model) in rows.items():
            row = sample("t", 0.99, "correct", now, model=model)
            row.question, row.matched_question = question, matched
            s.add(row)
    cal = Calibrator(db, lambda t: 0.5, verifier_models=verifier.scale_ids)
    before = cal.refresh("t", 0.01).labelled
    assert retag_legacy_samples(db, legacy, verifier.scale_id_of, batch_size=1) == 2
    with Session(db) as s:
        stored = dict(s.execute(select(MisfireSample.question, MisfireSample.verifier_model)).all())
    assert stored == {
        EN_PAIR[0]: verifier.en_scale_id,
        ZH_PAIR[0]: verifier.zh_scale_id,
        "パスワードを変更するには": legacy,
        "What is my balance?": "0123456789abcdef",
        "How do I close my account?": verifier.en_scale_id,
    }
    # Nothing counts differently now (4 of 5: not the other weights' sample)...
    assert before == cal.refresh("t", 0.01).labelled == 4
    # ...but the English one outlives a Chinese retrain, which it did not before.
    after_zh = retrained(verifier, zh=True)
    kept = Calibrator(db, lambda t: 0.5, verifier_models=after_zh.scale_ids).refresh("t", 0.01)
    assert kept.labelled == 2  # the re-tagged English one and the one written as English
    assert retag_legacy_samples(db, legacy, verifier.scale_id_of) == 0  # done once
    db.dispose()


def test_a_stopped_retag_leaves_the_rest_for_the_next_start(
    tmp_path: Path, verifier: GatewayVerifier
) -> None:
    db = migrated(tmp_path)
    now = utc_now()
    with Session(db) as s, s.begin():
        for _ in range(3):
            row = sample("t", 0.99, "correct", now, model=verifier.legacy_scale_id)
            row.question, row.matched_question = EN_PAIR
            s.add(row)
    stop = threading.Event()
    stop.set()
    assert retag_legacy_samples(db, verifier.legacy_scale_id, verifier.scale_id_of, stop=stop) == 0
    assert retag_legacy_samples(db, verifier.legacy_scale_id, verifier.scale_id_of) == 3
    with pytest.raises(TypeError):  # one id is not a collection of ids
        load_labels(db, "t", verifier.en_scale_id)
    db.dispose()
