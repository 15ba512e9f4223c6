"""The gateway load bench stores its entries under the keys the gateway searches: the
bench tenant's namespace with its minted id and the in-process engine's weights
revision (bench/gateway_load_common.py). When they drifted apart (the minted id joined
the namespace), every phase-2 "hit" request missed and the bench measured the engine."""

from __future__ import annotations

from pathlib import Path

from bench.gateway_load_common import TENANT, bench_keying, bench_query, chat_body
from bench.gateway_load_prepare import fake_answer
from gateway.app import Components
from prefix.config import EngineConfig
from prefix.model.loader import LoadedModel
from prefix.serve.engine import PrefixEngine
from semantic import Embedder
from tests.gateway.conftest import gateway_settings, running_gateway


def test_the_bench_keys_its_entries_as_the_gateway_looks_them_up(
    tiny_llama: LoadedModel, embedder: Embedder, tmp_path: Path
) -> None:
    engine = PrefixEngine(EngineConfig(block_size=16, num_blocks=32), loaded=tiny_llama)
    settings = gateway_settings(tmp_path)
    with running_gateway(settings, Components(engine=engine, embedder=embedder)) as gw:
        gw.admin.add_tenant("tests", TENANT, None, None)
        body = chat_body(gw.model, "How do I reset my password?", 24)
        ours = bench_query(body, bench_keying(gw.tenants, engine))
        theirs = gw.query(TENANT, body)  # as the gateway keys a request of the tenant
        assert ours.partition_key(embedder.embedder_id) == theirs.partition_key(
            embedder.embedder_id
        )
        # end to end: an entry stored under the bench's key is a hit over HTTP
        key = gw.admin.issue_key("tests", TENANT, "bench").key
        stored = gw.cache.store(ours, fake_answer(gw.model, "Use the reset link.", 20))
        assert stored.stored
        with gw.http(key) as http:
            r = http.post("/v1/chat/completions", json=body)
        assert r.status_code == 200 and r.headers["x-cachegate-semantic"] == "hit"
        assert r.json()["choices"][0]["message"]["content"] == "Use the reset link."
        # control: without the minted id the key differs (the drift this test guards)
        stale = bench_query(body, (f"tenant:{TENANT}", bench_keying(gw.tenants, engine)[1]))
        assert stale.partition_key(embedder.embedder_id) != theirs.partition_key(
            embedder.embedder_id
        )
