"""A gateway on a given embedder with the verifier off, over a scripted vLLM, and the
semantic header one question gets: what the threshold-knob tests of each embedder
share (test_routed_thresholds.py, test_e5_thresholds.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gateway.app import Components
from semantic.embedder_base import CoveringEmbedder
from tests.gateway import vllm_recordings as rec
from tests.gateway.admin_support import ADMIN_TOKEN
from tests.gateway.conftest import Gateway, chat_body, gateway_settings, running_gateway
from tests.gateway.scripted_upstream import scripted_upstream


@contextmanager
def knob_gateway(data_dir: Path, embedder: CoveringEmbedder) -> Iterator[Gateway]:
    with scripted_upstream("vllm") as up:
        settings = gateway_settings(data_dir, upstream_url=up.url, admin_token=ADMIN_TOKEN)
        with running_gateway(settings, Components(embedder=embedder)) as g:
            yield g


def semantic_header(gw: Gateway, key: str, question: str) -> str:
    with gw.http(key) as http:
        r = http.post("/v1/chat/completions", json=chat_body(rec.MODEL, question))
    assert r.status_code == 200, r.text
    return r.headers["x-cachegate-semantic"]
