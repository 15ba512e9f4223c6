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
from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from gateway.admin.service import TenantAdmin
from gateway.calibrator import Calibrator
from gateway.models import MisfireSample
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
    # An English retrain refits the Chinese map onto the common scale: Chinese scores
    # move too, though the Chinese weights stayed. The same map keeps the id.
    assert en_retrained.zh_scale_id == zh_id
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
    after_en = retrained(verifier, en=True)
    cut = Calibrator(db, lambda t: 0.5, verifier_models=after_en.scale_ids).refresh("t", 0.01)
    assert cut.labelled == 40  # only the Chinese ones: too few to confirm anything
    assert cut.source == "shipped"
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
