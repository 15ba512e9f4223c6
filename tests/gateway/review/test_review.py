"""Misfire sampling, the review API and shadow verification on a live gateway
(real SmolLM2 engine in-process, real embedder, SQLite, shadow verification on).

Entries are stored straight into the semantic cache where the answer's content
is the point (a deliberately wrong answer); the identical-answer case lets the
model answer, then asks the same question again: greedy decoding must produce
the same answer in the shadow request.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import func, insert, select
from sqlalchemy.orm import Session

from gateway.app import Components
from gateway.models import AuditEvent, MisfireSample, RequestStat
from gateway.policy import TenantPolicy
from gateway.review.sampling_rule import BOOST_BAND, sample_probability
from gateway.review.shadow import compare_answers
from gateway.tenants import utc_now
from prefix.model.loader import LoadedModel
from protocol.responses import response_body, usage
from semantic import Embedder
from semantic.models import SemanticEntry
from tests.gateway.conftest import (
    Gateway,
    assert_openai_error,
    chat_body,
    content,
    gateway_settings,
    metric,
    running_gateway,
    smol_engine,
    wait_until,
)

pytestmark = pytest.mark.slow

CHAT = "/v1/chat/completions"
ADMIN = "review-admin-token"
SAMPLES = "/admin/review/samples"
ALWAYS = TenantPolicy(sample_rate=1.0)


@pytest.fixture(scope="module")
def gw(
    smol_loaded: LoadedModel, embedder: Embedder, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateway]:
    settings = gateway_settings(
        tmp_path_factory.mktemp("review"),
        admin_token=ADMIN,
        shadow_verification=True,
        stats_flush_seconds=0.2,
        engine_snapshot_seconds=0,
    )
    parts = Components(engine=smol_engine(smol_loaded), embedder=embedder)
    with running_gateway(settings, parts) as gateway:
        yield gateway


def store(gw: Gateway, tenant: str, body: dict[str, Any], answer: str) -> int:
    """Put (question of ``body`` → ``answer``) in the tenant's semantic partition."""
    query = gw.query(tenant, body)
    response = response_body(
        "chat", "chatcmpl-seed", body["model"], answer, "stop", usage(20, 9, 0)
    )
    result = gw.cache.store(query, response)
    assert result.stored and result.entry_id is not None
    return result.entry_id


def samples(gw: Gateway, tenant: str, status: str = "all") -> list[dict[str, Any]]:
    with gw.http(ADMIN) as http:
        r = http.get(SAMPLES, params={"tenant": tenant, "status": status})
    assert r.status_code == 200, r.text
    data: list[dict[str, Any]] = r.json()["data"]
    return data


def rows(gw: Gateway, tenant: str) -> list[MisfireSample]:
    with Session(gw.app.state.db) as s:
        return list(s.scalars(select(MisfireSample).where(MisfireSample.tenant_id == tenant)))


def shadow_done(gw: Gateway, tenant: str) -> bool:
    found = rows(gw, tenant)
    return bool(found) and found[0].shadow_verdict is not None


def test_sampling_rule() -> None:
    thr = 0.89
    assert sample_probability(0.05, thr + 0.10, thr) == 0.05
    assert sample_probability(0.05, thr + BOOST_BAND - 1e-9, thr) == pytest.approx(0.15)
    assert sample_probability(0.05, thr + BOOST_BAND, thr) == 0.05  # the band is half-open
    assert sample_probability(0.5, thr, thr) == 1.0  # ×3, capped at 1
    assert sample_probability(1.0, 0.99, thr) == 1.0
    assert sample_probability(0.0, thr, thr) == 0.0


def test_a_sampled_hit_is_written_with_every_field(gw: Gateway) -> None:
    tenant, key = gw.tenant("smp", ALWAYS)
    stored_body = chat_body(gw.model, "What is the capital of France?")
    answer = "Paris is the capital of France."
    entry_id = store(gw, tenant, stored_body, answer)
    paraphrase = chat_body(gw.model, "Which city is the capital of France?")
    with gw.http(key) as http:
        r = http.post(CHAT, json=paraphrase)
    assert r.status_code == 200, r.text
    assert r.headers["x-cachegate-cache"] == "semantic-hit" and content(r) == answer
    score = float(r.headers["x-cachegate-similarity"])
    assert wait_until(lambda: len(samples(gw, tenant)) == 1, timeout=10)
    [s] = samples(gw, tenant, status="pending")
    assert s["tenant_id"] == tenant
    assert s["request_id"] == r.headers["x-request-id"]
    assert s["question"] == "Which city is the capital of France?"
    assert s["matched_question"] == "What is the capital of France?"
    assert s["served_answer"] == answer
    assert s["score"] == pytest.approx(score, abs=1e-4)
    assert s["threshold"] == ALWAYS.threshold
    assert s["entry_id"] == entry_id
    query = gw.query(tenant, paraphrase)
    assert s["partition_key"] == gw.cache.partition_key(query)
    assert s["label"] is None and s["note"] is None and s["labeled_by"] is None
    assert s["created_at"] is not None
    # verifier off: no score, and no cut a label could count for
    assert s["verifier_score"] is None and s["verifier_model"] is None
    assert s["refines_cut"] is None
    questions = s["entity_comparison"]["questions"]
    assert questions["matches"] is True and "kinds" in questions
    assert s["entity_comparison"]["sampling"] == {
        "rate": 1.0,
        "probability": 1.0,
        "boosted": False,
    }
    # the request was also recorded for the reports
    assert wait_until(lambda: hits_recorded(gw, tenant) == 1, timeout=10)


def hits_recorded(gw: Gateway, tenant: str) -> int:
    with Session(gw.app.state.db) as s:
        return len(
            list(
                s.scalars(
                    select(RequestStat).where(
                        RequestStat.tenant_id == tenant, RequestStat.cache == "semantic-hit"
                    )
                )
            )
        )


def test_no_sample_at_rate_zero(gw: Gateway) -> None:
    tenant, key = gw.tenant("none", TenantPolicy(sample_rate=0.0))
    body = chat_body(gw.model, "What colour is a ripe banana?")
    store(gw, tenant, body, "Yellow.")
    with gw.http(key) as http:
        r = http.post(CHAT, json=body)
    assert r.headers["x-cachegate-cache"] == "semantic-hit"
    assert not wait_until(lambda: bool(rows(gw, tenant)), timeout=1.0)


def insert_sample(gw: Gateway, tenant: str) -> int:
    with gw.app.state.db.begin() as conn:
        result = conn.execute(
            insert(MisfireSample).values(
                tenant_id=tenant,
                created_at=utc_now(),
                request_id="chatcmpl-x",
                entry_id=None,
                partition_key="p",
                question="q",
                matched_question="m",
                served_answer="a",
                score=0.9,
                threshold=0.89,
            )
        )
        return int(result.inserted_primary_key[0])


def test_labelling_api(gw: Gateway) -> None:
    tenant, key = gw.tenant("lab")
    first, second = insert_sample(gw, tenant), insert_sample(gw, tenant)
    url = f"{SAMPLES}/{first}/label"
    with gw.http(ADMIN) as http:
        r = http.post(url, json={"label": "misfire", "note": "wrong city"})
        assert r.status_code == 200, r.text
        assert (r.json()["label"], r.json()["note"], r.json()["labeled_by"]) == (
            "misfire",
            "wrong city",
            "admin",
        )
        assert r.json()["labeled_at"] is not None
        # relabel without a note, naming the reviewer
        r = http.post(url, json={"label": "correct"}, headers={"X-Admin-Actor": "alice"})
        assert r.status_code == 200 and r.json()["labeled_by"] == "admin:alice"
        assert r.json()["note"] is None
        assert http.get(f"{SAMPLES}/{first}").json()["label"] == "correct"
        # invalid labels and ids
        for bad in (
            {"label": "wrong"},
            {"label": ""},
            {"label": None},
            {},
            {"label": "correct", "x": 1},
            {"label": "<b>wrong</b>"},
            {"label": "<b>" * 2000},
            {"label": "a\x00b"},
        ):
            err = assert_openai_error(http.post(url, json=bad), 400)
            assert "wrong" not in err["message"] and "<b>" not in err["message"], err
        assert_openai_error(http.post(url, content=b"not json"), 400)
        assert_openai_error(http.post(f"{SAMPLES}/999999/label", json={"label": "correct"}), 404)
        assert_openai_error(http.get(f"{SAMPLES}/999999"), 404)
        assert_openai_error(http.post(f"{SAMPLES}/abc/label", json={"label": "correct"}), 400)
        assert_openai_error(http.get(SAMPLES, params={"status": "done"}), 400)
        assert_openai_error(http.post(url, json={"label": "misfire", "note": "a\x00b"}), 400)
        assert_openai_error(http.get(SAMPLES, params={"tenant": "a\x00b"}), 400)
        # pending vs labelled lists, filtered by tenant
        pending = http.get(SAMPLES, params={"tenant": tenant}).json()["data"]
        assert [s["id"] for s in pending] == [second]
        labelled = http.get(SAMPLES, params={"tenant": tenant, "status": "labeled"}).json()
        assert [s["id"] for s in labelled["data"]] == [first]
        page = http.get(SAMPLES, params={"tenant": tenant, "status": "all", "limit": 1}).json()
        assert [s["id"] for s in page["data"]] == [second] and page["next_before_id"] == second
    # auth: none, wrong, a tenant key
    with gw.http() as anon, gw.http("nope") as wrong, gw.http(key) as tenant_client:
        assert_openai_error(anon.get(SAMPLES), 401)
        assert_openai_error(wrong.post(url, json={"label": "correct"}), 401)
        assert_openai_error(tenant_client.post(url, json={"label": "misfire"}), 403)
    assert samples(gw, tenant, "labeled")[0]["label"] == "correct"  # unchanged by the refusals
    with Session(gw.app.state.db) as s:
        events = list(
            s.scalars(
                select(AuditEvent)
                .where(AuditEvent.action == "review.label", AuditEvent.tenant_id == tenant)
                .order_by(AuditEvent.id)
            )
        )
    assert [
        (e.actor, (e.details or {})["label"], (e.details or {})["previous"]) for e in events
    ] == [
        ("admin", "misfire", None),
        ("admin:alice", "correct", "misfire"),
    ]
    assert all(e.target == f"sample:{first}" for e in events)


def entries(gw: Gateway, tenant: str) -> int:
    with Session(gw.app.state.db) as s:
        return int(
            s.scalar(
                select(func.count())
                .select_from(SemanticEntry)
                .where(SemanticEntry.tenant == tenant)
            )
            or 0
        )


def settled_engine_runs(gw: Gateway, quiet_seconds: float = 1.0) -> float:
    """``prefix_requests_total`` once the engine has been idle for ``quiet_seconds``.

    Earlier tests' hits start shadow requests in the background (this module's
    gateway verifies every sampled hit); they must finish before a test counts
    the engine runs its own request causes.
    """
    last, since = -1.0, time.monotonic()
    deadline = since + 120
    while time.monotonic() < deadline:
        text = gw.metrics()
        runs = metric(text, "prefix_requests_total")
        busy = metric(text, "prefix_num_requests_running") + metric(
            text, "prefix_num_requests_waiting"
        )
        if runs != last or busy:
            last, since = runs, time.monotonic()
        elif time.monotonic() - since >= quiet_seconds:
            return runs
        time.sleep(0.1)
    raise AssertionError("the engine never went idle")


def test_shadow_agrees_when_the_model_gives_the_same_answer(gw: Gateway) -> None:
    tenant, key = gw.tenant("agree", ALWAYS)
    body = chat_body(gw.model, "What is the capital of Italy?")
    with gw.http(key) as http:
        first = http.post(CHAT, json=body)
        assert first.headers["x-cachegate-backfill"] == "stored", first.text
        engine_runs = settled_engine_runs(gw)
        hit = http.post(CHAT, json=body)
        # the response is back before the shadow request has answered
        assert all(r.shadow_verdict is None for r in rows(gw, tenant))
    assert hit.headers["x-cachegate-cache"] == "semantic-hit"
    assert content(hit) == content(first)
    assert wait_until(lambda: shadow_done(gw, tenant), timeout=120)
    [row] = rows(gw, tenant)
    assert row.shadow_verdict == "agree"
    assert row.shadow_answer == content(first)  # greedy: the same answer again
    assert row.shadow_similarity == pytest.approx(1.0, abs=1e-4)
    assert row.shadow_at is not None and row.label is None
    assert row.entity_comparison is not None and row.entity_comparison["answers"]["matches"]
    # the same answer again needs no embedding comparison, so no floor was applied
    assert row.entity_comparison["shadow_floor"] is None
    # the shadow request ran on the engine, and nothing was backfilled by it
    assert metric(gw.metrics(), "prefix_requests_total") == engine_runs + 1
    assert entries(gw, tenant) == 1
    assert metric(gw.metrics(), "cachegate_shadow_verdicts_total", verdict="agree") >= 1


def test_the_shadow_request_runs_under_the_tenants_kv_quota(gw: Gateway) -> None:
    # The shadow request takes KV blocks from the tenant's share of the pool: with a
    # quota of one block the engine refuses its prompt (a shadow error), where the same
    # hit without a quota is verified (the test above).
    before = metric(gw.metrics(), "cachegate_shadow_verdicts_total", verdict="error")
    tenant, key = gw.tenant("quota", TenantPolicy(sample_rate=1.0, kv_block_quota=1))
    body = chat_body(gw.model, "What is the capital of Italy?")
    store(gw, tenant, body, "Rome is the capital of Italy.")
    with gw.http(key) as http:
        hit = http.post(CHAT, json=body)
    assert hit.headers["x-cachegate-cache"] == "semantic-hit"
    assert wait_until(
        lambda: (
            metric(gw.metrics(), "cachegate_shadow_verdicts_total", verdict="error") == before + 1
        ),
        timeout=60,
    )
    [row] = rows(gw, tenant)
    assert row.shadow_verdict is None  # no verdict from a request that never ran


def test_shadow_disagrees_with_a_wrong_cached_answer(gw: Gateway) -> None:
    tenant, key = gw.tenant("wrong", ALWAYS)
    body = chat_body(gw.model, "What color is the sky on a clear day?")
    wrong = "The Eiffel Tower is 330 metres tall and was finished in 1889."
    store(gw, tenant, body, wrong)
    with gw.http(key) as http:
        hit = http.post(CHAT, json=body)
    assert hit.headers["x-cachegate-cache"] == "semantic-hit" and content(hit) == wrong
    assert wait_until(lambda: shadow_done(gw, tenant), timeout=120)
    [row] = rows(gw, tenant)
    assert row.shadow_verdict == "disagree"
    assert row.shadow_similarity is not None and row.shadow_similarity < 0.5
    assert row.shadow_answer and "blue" in row.shadow_answer.lower()
    assert row.entity_comparison is not None
    assert row.entity_comparison["answers"]["matches"] is False  # 330 / 1889 on one side only
    assert entries(gw, tenant) == 1  # still only the stored (wrong) entry
    with gw.http(ADMIN) as http:
        shown = http.get(f"{SAMPLES}/{row.id}").json()
    assert (
        shown["shadow"]["verdict"] == "disagree" and shown["shadow"]["answer"] == row.shadow_answer
    )


def test_compare_answers_edge_cases(embedder: Embedder) -> None:
    long_a = "Transfers between Northwind accounts are instant. " * 60  # > 256 embedder tokens
    long_b = long_a + "Thank you."
    result = compare_answers(embedder, long_a, long_b)
    assert result.verdict == "agree" and result.similarity > 0.9
    assert compare_answers(None, "same", "same").similarity == 1.0
    assert compare_answers(embedder, "", "").verdict == "agree"
    assert compare_answers(embedder, "Paris.", "").verdict == "disagree"
    # similar wording, different amount: the validators make it a disagreement
    amounts = compare_answers(embedder, "The fee is 5 EUR.", "The fee is 50 EUR.")
    assert amounts.similarity > 0.8 and amounts.verdict == "disagree"
    assert amounts.entities["mismatches"] == ["amount"]
