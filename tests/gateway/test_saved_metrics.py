"""The four series the dashboard and the alerts read beyond the request counters, on a
live gateway (in-process SmolLM2, the real embedder, a fresh PostgreSQL schema so the
change feed LISTENs as in production):

- ``cachegate_cost_saved_usd_total`` and ``cachegate_prefill_flops_saved_total`` equal
  what the misfire report's own ``savings`` gives for the same requests' numbers;
- ``cachegate_misfire_labels_total`` counts the labels given through the review API;
- ``cachegate_replica_sync_lag_seconds`` is small while the feed runs and grows once
  it is stopped.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import update

import gateway.review.api as review_api
from gateway.app import Components
from gateway.models import MisfireSample
from gateway.reports.api import model_shape
from gateway.reports.sections import ReportParams, Stat, savings
from gateway.tenants import utc_now
from prefix.model.loader import LoadedModel
from semantic import Embedder
from tests.gateway.conftest import (
    LONG_SYSTEM,
    PG_DSN,
    PG_SERVER_URL,
    Gateway,
    cached_tokens,
    chat_body,
    gateway_settings,
    metric,
    running_gateway,
    smol_engine,
    wait_until,
)
from tests.gateway.e2e_support import CAPITAL, SKY, post
from tests.gateway.review.test_review import insert_sample

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

ADMIN = "saved-metrics-admin"
POLL = 0.5
# Not the defaults, so a counter that ignored the settings would be off.
PRICE_PROMPT, PRICE_COMPLETION = 3.0, 11.0


@pytest.fixture(scope="module")
def gw(
    pg_available: None,
    smol_loaded: LoadedModel,
    embedder: Embedder,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Gateway]:
    import psycopg

    schema = f"cg_saved_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    data_dir: Path = tmp_path_factory.mktemp("saved-metrics")
    settings = gateway_settings(
        data_dir,
        f"{PG_SERVER_URL}?options=-csearch_path%3D{schema}",
        admin_token=ADMIN,
        sync_poll_seconds=POLL,
        price_per_million_prompt_tokens=PRICE_PROMPT,
        price_per_million_completion_tokens=PRICE_COMPLETION,
    )
    parts = Components(engine=smol_engine(smol_loaded), embedder=embedder)
    try:
        with running_gateway(settings, parts) as gateway:
            yield gateway
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def stat(tenant: str, r: httpx.Response) -> Stat:
    """The report's row for one answered request, from what the client saw."""
    use = r.json()["usage"]
    return Stat(
        at=utc_now(),
        tenant_id=tenant,
        cache=r.headers["x-cachegate-cache"],
        semantic=r.headers.get("x-cachegate-semantic", ""),
        score=None,
        prompt_tokens=int(use["prompt_tokens"]),
        cached_tokens=cached_tokens(r),
        completion_tokens=int(use["completion_tokens"]),
        ttft_ms=None,
    )


def test_saved_counters_follow_the_report(gw: Gateway) -> None:
    tenant, key = gw.tenant("saved")
    model = gw.model
    with gw.http(key) as client:
        answers = [
            post(client, chat_body(model, CAPITAL, system=LONG_SYSTEM)),  # cold miss
            post(client, chat_body(model, SKY, system=LONG_SYSTEM)),  # prefix hit (system)
            post(client, chat_body(model, CAPITAL, system=LONG_SYSTEM)),  # semantic hit
        ]
    stats = [stat(tenant, r) for r in answers]
    labels = [s.cache for s in stats]
    assert labels[2] == "semantic-hit" and labels[1] == "prefix-hit", labels
    assert stats[1].cached_tokens > 0

    shape = model_shape(gw.state)
    assert shape is not None  # in-process engine: FLOPs are counted
    text = gw.metrics()
    for layer, rows in (
        ("semantic", [s for s in stats if s.cache == "semantic-hit"]),
        ("prefix", [s for s in stats if s.cache != "semantic-hit"]),
    ):
        report = savings(
            rows,
            ReportParams(price_prompt=PRICE_PROMPT, price_completion=PRICE_COMPLETION, model=shape),
        )
        assert report["cost_saved_usd"] > 0
        got_usd = metric(text, "cachegate_cost_saved_usd_total", tenant=tenant, layer=layer)
        got_flops = metric(text, "cachegate_prefill_flops_saved_total", tenant=tenant, layer=layer)
        assert got_usd == pytest.approx(report["cost_saved_usd"], rel=1e-9), layer
        assert got_flops == pytest.approx(report["prefill_flops_saved"], rel=1e-9), layer


def test_review_labels_are_counted(gw: Gateway) -> None:
    tenant, _ = gw.tenant("labels")
    sample = insert_sample(gw, tenant)
    url = f"/admin/review/samples/{sample}/label"

    def counts() -> tuple[float, float, float, float]:
        text = gw.metrics()
        name, withdrawn = (
            "cachegate_misfire_labels_total",
            "cachegate_misfire_labels_withdrawn_total",
        )
        return (
            metric(text, name, tenant=tenant, label="misfire"),
            metric(text, name, tenant=tenant, label="correct"),
            metric(text, withdrawn, tenant=tenant, label="misfire"),
            metric(text, withdrawn, tenant=tenant, label="correct"),
        )

    assert counts() == (0, 0, 0, 0)
    with gw.http(ADMIN) as http:
        assert http.post(url, json={"label": "misfire"}).status_code == 200
        assert counts() == (1, 0, 0, 0)
        # a relabel: the new label counted, the earlier one withdrawn (session 46: before,
        # a corrected misclick stayed a misfire in the alert's ratio)
        assert http.post(url, json={"label": "correct"}).status_code == 200
        assert counts() == (1, 1, 1, 0)
        assert http.post(url, json={"label": "correct"}).status_code == 200  # the same again
        assert http.post(url, json={"label": "maybe"}).status_code == 400  # refused: not counted
        assert (
            http.post("/admin/review/samples/999999/label", json={"label": "misfire"}).status_code
            == 404
        )
    assert counts() == (1, 1, 1, 0)  # net: one correct label, as the report counts it
    # a label given before the alert's 24 h window was never in its counts: a relabel of
    # it counts the new label and withdraws nothing (the diff review of session 46)
    with gw.app.state.db.begin() as conn:
        two_days_ago = utc_now() - review_api.ALERT_WINDOW * 2
        conn.execute(
            update(MisfireSample).where(MisfireSample.id == sample).values(labeled_at=two_days_ago)
        )
    with gw.http(ADMIN) as http:
        assert http.post(url, json={"label": "misfire"}).status_code == 200
    assert counts() == (2, 1, 1, 0)


def test_review_labels_are_weighted_as_the_report_weights_them(gw: Gateway) -> None:
    """A hit sampled with probability 0.25 stands for four: the weighted count the
    misfire-rate alert reads adds 4 (the plain count 1); one with no recorded
    probability adds 1 (the control)."""
    tenant, _ = gw.tenant("weighted-labels")
    drawn, plain = insert_sample(gw, tenant), insert_sample(gw, tenant)
    with gw.app.state.db.begin() as conn:
        conn.execute(
            update(MisfireSample)
            .where(MisfireSample.id == drawn)
            .values(entity_comparison={"sampling": {"probability": 0.25}})
        )
    with gw.http(ADMIN) as http:
        for sample in (drawn, plain):
            url = f"/admin/review/samples/{sample}/label"
            assert http.post(url, json={"label": "correct"}).status_code == 200
    text = gw.metrics()
    weighted = metric(
        text, "cachegate_misfire_labels_weighted_total", tenant=tenant, label="correct"
    )
    assert weighted == pytest.approx(5.0)
    assert metric(text, "cachegate_misfire_labels_total", tenant=tenant, label="correct") == 2


def test_a_label_racing_the_tenants_delete_leaves_no_series(
    gw: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The delete commits (and forgets the tenant's series) between the label's commit
    # and its count: the count brought the series back, and a tenant re-created under
    # the id inherited it (a review, session 43). Positive control: the test above.
    tenant, _ = gw.tenant("labels-gone")
    sample = insert_sample(gw, tenant)
    real = review_api.relabel_sample

    def label_then_delete(*args: Any) -> Any:
        out = real(*args)
        with gw.http(ADMIN) as http:  # another admin, on another connection
            assert http.delete(f"/admin/tenants/{tenant}").status_code == 200
        return out

    monkeypatch.setattr(review_api, "relabel_sample", label_then_delete)
    with gw.http(ADMIN) as http:
        r = http.post(f"/admin/review/samples/{sample}/label", json={"label": "misfire"})
    assert r.status_code == 200, r.text
    assert f'tenant="{tenant}"' not in gw.metrics()


def test_each_labelled_tenant_exports_its_own_target(gw: Gateway) -> None:
    """The misfire-rate alert compares each tenant's rate with its own
    ``target_misfire_rate`` (before session 47: a fixed 1%), exported once a label is
    counted and followed through the change feed when the policy changes."""
    tenant, _ = gw.tenant("target")
    quiet, _ = gw.tenant("target-unlabelled")
    name = "cachegate_misfire_target_rate"

    def exported(tid: str) -> bool:
        return f'{name}{{tenant="{tid}"}}' in gw.metrics()

    assert not exported(tenant)
    sample = insert_sample(gw, tenant)
    with gw.http(ADMIN) as http:
        url = f"/admin/review/samples/{sample}/label"
        assert http.post(url, json={"label": "correct"}).status_code == 200
        assert metric(gw.metrics(), name, tenant=tenant) == 0.01  # the default
        for tid in (tenant, quiet):
            r = http.patch(f"/admin/tenants/{tid}/policy", json={"target_misfire_rate": 0.05})
            assert r.status_code == 200, r.text
    assert wait_until(lambda: metric(gw.metrics(), name, tenant=tenant) == 0.05)
    assert not exported(quiet)  # control: no label, no series


def test_sync_lag_is_exported_and_grows_once_the_feed_stops(gw: Gateway) -> None:
    name = "cachegate_replica_sync_lag_seconds"
    assert f"# TYPE {name} gauge" in gw.metrics()
    lag = metric(gw.metrics(), name)
    assert 0 <= lag <= POLL + 1.0, lag  # healthy: about one poll interval at most
    assert metric(gw.metrics(), "cachegate_replica_sync_gaps") == gw.app.state.sync.stats()["gaps"]
    gw.app.state.sync.stop()  # the lifespan's stop at shutdown is then a no-op
    before = metric(gw.metrics(), name)
    time.sleep(1.5)
    after = metric(gw.metrics(), name)
    assert after >= before + 1.4, (before, after)
