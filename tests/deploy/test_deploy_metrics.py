"""Every series the dashboard and the alert rules query is one the app exports,
checked against live ``/metrics``: a real engine server (SmolLM2, with an L3
disk tier so the tier series exist) behind a real gateway over HTTP (the real
embedder, SQLite), as in deploy/compose.yaml, after a miss and a semantic hit.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from gateway.app import Components
from prefix.config import EngineConfig
from prefix.model.loader import LoadedModel
from prefix.serve.engine import PrefixEngine
from prefix.serve.server import create_engine_app
from semantic import Embedder
from tests.deploy.promql import all_exprs, read
from tests.gateway.conftest import chat_body, gateway_settings, running_gateway
from tests.live_server import serving

pytestmark = pytest.mark.slow

#: Series the dashboard and alerts already query but the app does not export yet (none
#: now; a panel or rule written ahead of the app lists its series here and in
#: docs/operations.md). Remove a name once it is exported:
#: test_pending_series_are_not_exported_yet fails as a reminder.
PENDING: set[str] = set()
#: Made by Prometheus itself for every target, never by an exporter.
PROMETHEUS_OWN = {"up"}
#: Labels Prometheus attaches to every scraped series, and the histogram bucket label.
TARGET_LABELS = {"instance", "job", "le"}
SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "summary": ("", "_sum", "_count", "_created"),
    "gauge": ("",),
    "untyped": ("",),
}
KEY = "deploy-tests-engine-key"
SALT = "deploy-tests-salt"


def exported(text: str) -> tuple[set[str], dict[str, set[str]]]:
    """Series names a scrape of ``text`` yields, and the label names seen on each."""
    names: set[str] = set()
    labels: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        names |= {family.name + s for s in SUFFIXES[family.type]}
        for sample in family.samples:
            labels.setdefault(sample.name, set()).update(sample.labels)
    return names, labels


@pytest.fixture(scope="module")
def scrapes(
    smol_loaded: LoadedModel, embedder: Embedder, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str]]:
    """(gateway /metrics, engine /metrics) after a miss and a semantic hit."""
    tmp: Path = tmp_path_factory.mktemp("deploy-metrics")
    config = EngineConfig(
        block_size=16,
        num_blocks=160,
        server_salt=SALT,
        kv_disk_path=str(tmp / "kv"),
        kv_disk_bytes=64 * 1024 * 1024,
    )
    engine = PrefixEngine(config, loaded=smol_loaded)
    model = smol_loaded.model_id
    with serving(create_engine_app(engine, trusted_key=KEY)) as engine_url:
        settings = gateway_settings(
            tmp,
            upstream_url=engine_url,
            upstream_model=model,
            engine_key=KEY,
            server_salt=SALT,
        )
        with running_gateway(settings, Components(embedder=embedder)) as gw:
            _, key = gw.tenant("deploy")
            body = chat_body(model, "What is the capital of France?", max_tokens=24)
            with gw.http(key) as client:
                outcomes = [client.post("/v1/chat/completions", json=body) for _ in range(2)]
            assert [r.status_code for r in outcomes] == [200, 200], outcomes[-1].text
            yield gw.metrics(), httpx.get(f"{engine_url}/metrics", timeout=10).text


def test_every_queried_series_is_exported(scrapes: tuple[str, str]) -> None:
    names, _ = exported(scrapes[0] + scrapes[1])
    missing: dict[str, list[str]] = {}
    for where, expr in all_exprs():
        for series in read(expr).series - names - PENDING - PROMETHEUS_OWN:
            missing.setdefault(series, []).append(where)
    assert not missing, f"queried but not exported: {missing}"


def test_matched_labels_exist_on_their_series(scrapes: tuple[str, str]) -> None:
    _, labels = exported(scrapes[0] + scrapes[1])
    checked, wrong = 0, []
    for where, expr in all_exprs():
        for series, label in read(expr).matchers:
            if series in labels:  # a series with no sample yet says nothing about labels
                checked += 1
                if label not in labels[series] | TARGET_LABELS:
                    wrong.append((where, series, label))
    assert not wrong, wrong
    # The tenant matchers on the request, hit and TTFT series did get checked.
    assert checked >= 10, checked


def test_grouping_labels_exist(scrapes: tuple[str, str]) -> None:
    """Every by (...) label is on some series of its expression (or is a target label)."""
    _, labels = exported(scrapes[0] + scrapes[1])
    checked, wrong = 0, []
    for where, expr in all_exprs():
        reading = read(expr)
        known = [labels[s] for s in reading.series if s in labels]
        if len(known) != len(reading.series):
            continue  # some series has no sample here: cannot tell
        checked += 1
        have = set().union(*known) | TARGET_LABELS
        wrong += [(where, lab) for lab in reading.grouping - have]
    assert not wrong, wrong
    assert checked >= 10, checked


def test_pending_series_are_not_exported_yet(scrapes: tuple[str, str]) -> None:
    names, _ = exported(scrapes[0] + scrapes[1])
    used = set().union(*(read(expr).series for _, expr in all_exprs()))
    assert not PENDING - used, PENDING - used
    assert not PENDING & names, f"now exported, remove from PENDING: {PENDING & names}"


def test_scrapes_carry_the_traffic(scrapes: tuple[str, str]) -> None:
    """Positive control: the two requests are on both sides (a miss, then a hit)."""
    gateway, engine = scrapes
    _, labels = exported(gateway + engine)
    assert {"tenant", "cache"} <= labels["cachegate_requests_total"]
    assert {"tenant", "layer", "le"} <= labels["cachegate_time_to_first_token_seconds_bucket"]
    assert "tier" in labels["prefix_tier_used_bytes"]
    hits = [
        s
        for f in text_string_to_metric_families(gateway)
        for s in f.samples
        if s.name == "cachegate_requests_total" and s.labels["cache"] == "semantic-hit"
    ]
    assert sum(s.value for s in hits) == 1
