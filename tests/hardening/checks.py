"""What every response of the hardening suite must satisfy."""

from __future__ import annotations

import json

import httpx

from protocol.headers import MAX_TOKEN_CHARS


def check_response(r: httpx.Response, body: bytes | None = None) -> None:
    """Never a 5xx; a 4xx is an OpenAI-shaped error; headers are short ASCII tokens."""
    where = f"{r.request.method} {r.request.url.path} body={body[:200]!r}" if body else ""
    assert r.status_code < 500, (r.status_code, r.text[:500], where)
    for name, value in r.headers.items():
        if name.startswith("x-cachegate-"):
            assert value.isascii() and len(value) <= MAX_TOKEN_CHARS, (name, value, where)
    if r.status_code >= 400 and r.headers.get("content-type", "").startswith("application/json"):
        err = r.json().get("error")
        assert isinstance(err, dict) and isinstance(err.get("message"), str), (r.text, where)


def check_stream(text: str, body: bytes | None = None) -> None:
    """A 200 stream is SSE that ends with ``data: [DONE]`` (an error event before it is
    fine: it is how a stream says so after its status line went out)."""
    events = [e for e in text.split("\n\n") if e.strip()]
    assert events and events[-1] == "data: [DONE]", (text[-300:], body and body[:200])
    for event in events[:-1]:
        assert event.startswith("data: "), event
        json.loads(event[len("data: ") :])
