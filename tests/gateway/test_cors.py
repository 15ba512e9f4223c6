"""CORS: off unless ``CACHEGATE_CORS_ORIGINS`` names origins (a browser's preflight was a
405, so a web UI that calls vLLM from the browser could not call the gateway: session
46's review). Keys travel in a header, so no credentials are allowed."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from gateway.app import create_app
from tests.gateway.conftest import gateway_settings

PREFLIGHT = {
    "Origin": "https://chat.example.com",
    "Access-Control-Request-Method": "POST",
    "Access-Control-Request-Headers": "authorization, content-type",
}


def test_a_named_origin_gets_its_preflight_and_reads_the_answers_headers(tmp_path: Path) -> None:
    app = create_app(gateway_settings(tmp_path, cors_origins="https://chat.example.com"))
    client = TestClient(app)  # no lifespan: CORS answers before any route
    r = client.options("/v1/chat/completions", headers=PREFLIGHT)
    assert r.status_code == 200
    assert r.headers["access-control-allow-origin"] == "https://chat.example.com"
    assert "POST" in r.headers["access-control-allow-methods"]
    assert "authorization" in r.headers["access-control-allow-headers"].lower()
    assert "access-control-allow-credentials" not in r.headers
    answer = client.get("/health", headers={"Origin": "https://chat.example.com"})
    assert answer.headers["access-control-allow-origin"] == "https://chat.example.com"
    exposed = answer.headers["access-control-expose-headers"].lower()
    assert "x-cachegate-cache" in exposed and "x-ratelimit-remaining-requests" in exposed
    # an origin not named gets no grant
    other = client.options("/v1/chat/completions", headers=PREFLIGHT | {"Origin": "https://x.io"})
    assert "access-control-allow-origin" not in other.headers


def test_any_origin_with_a_star(tmp_path: Path) -> None:
    client = TestClient(create_app(gateway_settings(tmp_path, cors_origins="*")))
    r = client.options("/v1/embeddings", headers=PREFLIGHT | {"Origin": "https://a.b"})
    assert r.status_code == 200 and r.headers["access-control-allow-origin"] == "*"


def test_off_by_default(tmp_path: Path) -> None:
    client = TestClient(create_app(gateway_settings(tmp_path)))
    r = client.options("/v1/chat/completions", headers=PREFLIGHT)
    assert r.status_code == 405 and "access-control-allow-origin" not in r.headers
    answer = client.get("/health", headers={"Origin": "https://chat.example.com"})
    assert "access-control-allow-origin" not in answer.headers
