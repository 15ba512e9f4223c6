"""Stream chunks whose inside is not the OpenAI shape, and error events that are odd.

A chunk is a JSON object the gateway routes (an error event, the usage it asked for);
inside it, ``choices``, each choice and its ``delta`` are only read, for the metrics
and the backfill (gateway/proxy/relay.py, gateway/proxy/passthrough.py). A field
there of the wrong type is forwarded as the upstream sent it, byte for byte, first
chunk or later, and the answer is not stored: never a 500, never a stream cut short.
``error`` is read as OpenAI's SDK reads it: only a truthy value is an error event,
and one that is not an object still gets an error body in the OpenAI shape.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi import Request
from fastapi.responses import Response

from tests.gateway.conftest import Gateway, assert_openai_error
from tests.gateway.proxy.relay.support import CHAT, MODEL, OVERLOADED, Scripted, ask

COMPLETIONS = "/v1/completions"
SECRET = "private-user-text"  # the client's words: never rendered by the gateway itself
DONE = b"data: [DONE]\n\n"
_COUNTS = {"prompt_tokens": 9, "completion_tokens": 5, "total_tokens": 14}
# The usage chunk the gateway asks for (an answer without usage is not stored); the
# client did not ask for it, so it never reaches the client.
USAGE = b"data: " + json.dumps({"id": "c1", "choices": [], "usage": _COUNTS}).encode() + b"\n\n"


def raw_chunk(choices: Any, kind: str = "chat", **extra: Any) -> bytes:
    """One chunk with these ``choices``, whatever their shape."""
    obj = "chat.completion.chunk" if kind == "chat" else "text_completion"
    body = {"id": "c1", "object": obj, "created": 1, "model": MODEL, "choices": choices}
    return b"data: " + json.dumps(body | extra, separators=(",", ":")).encode() + b"\n\n"


def event(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
    return raw_chunk([choice], **extra)


def text(piece: Any, finish: str | None = None) -> bytes:
    """A legacy completions chunk."""
    choice = {"index": 0, "text": piece, "finish_reason": finish, "logprobs": None}
    return raw_chunk([choice], "completion")


ROLE = event({"role": "assistant", "content": ""})
HELLO = event({"content": "Paris is the capital of France."})
STOP = event({}, "stop")

# Each has a field the gateway reads, of the wrong type; "control" is well formed.
CHUNKS = {
    "control": event({"content": " It is."}),
    "delta-string": raw_chunk([{"index": 0, "delta": "x", "finish_reason": None}]),
    "choices-number": raw_chunk(5),
    "choices-true": raw_chunk(True),
    "choices-object": raw_chunk({"index": 0, "delta": {"content": " It is."}}),
    "choice-string": raw_chunk(["x"]),
    "content-number": event({"content": 5}),
    "index-string": raw_chunk([{"index": "0", "delta": {"content": " It is."}}]),
    "finish-number": raw_chunk([{"index": 0, "delta": {}, "finish_reason": 1}]),
    "tool-calls-number": event({"tool_calls": 5}),
}


class Counted:
    """The scripted upstream answering every request with the same stream."""

    def __init__(self, up: Scripted, *parts: bytes) -> None:
        self.calls = 0
        body = b"".join(parts)

        async def handler(_: dict[str, Any], request: Request) -> Response:
            self.calls += 1
            return Response(body, media_type="text/event-stream")

        up.handler = handler


def relayed_then_asked_again(
    gw: Gateway, up: Scripted, key: str, path: str, body: dict[str, Any], parts: list[bytes]
) -> tuple[bytes, str, int]:
    """What the client got for a stream of ``parts``; the cache label and the upstream's
    calls when it asks the same again (a hit only if the first answer was stored)."""
    upstream = Counted(up, *parts, USAGE, DONE)
    with gw.http(key) as http:
        first = http.post(path, json=body)
        again = http.post(path, json=body)
    assert first.status_code == 200, first.text
    assert again.status_code == 200, again.text
    return first.content, again.headers["x-cachegate-cache"], upstream.calls


# ----------------------------------------------------------------- malformed choices


@pytest.mark.parametrize("where", ["first", "mid-stream"])
@pytest.mark.parametrize("shape", list(CHUNKS))
def test_a_chunk_with_unreadable_choices_is_forwarded_as_it_came_and_not_stored(
    gw: Gateway, up: Scripted, tenant: tuple[str, str], shape: str, where: str
) -> None:
    parts = [CHUNKS[shape], HELLO, STOP] if where == "first" else [ROLE, HELLO, CHUNKS[shape], STOP]
    question = f"What is the capital of France? ({shape}, {where})"
    got, label, calls = relayed_then_asked_again(
        gw, up, tenant[1], CHAT, ask(question, stream=True), parts
    )
    assert got == b"".join(parts) + DONE  # byte for byte, the usage taken out, [DONE]
    if shape == "control":
        assert (label, calls) == ("semantic-hit", 1)
    else:  # what the client got is not what the gateway read: never replayed
        assert (label, calls) == ("miss", 2)


@pytest.mark.parametrize("shape", ["control", "text-number", "text-object"])
def test_a_completions_chunk_with_unreadable_text_is_forwarded_and_not_stored(
    gw: Gateway, up: Scripted, tenant: tuple[str, str], shape: str
) -> None:
    odd = {"control": " It is.", "text-number": 5, "text-object": {"t": "x"}}[shape]
    parts = [text("Paris is the capital of France."), text(odd), text("", "stop")]
    body = {"model": MODEL, "prompt": f"The capital of France ({shape})?", "stream": True}
    got, label, calls = relayed_then_asked_again(gw, up, tenant[1], COMPLETIONS, body, parts)
    assert got == b"".join(parts) + DONE
    assert (label, calls) == (("semantic-hit", 1) if shape == "control" else ("miss", 2))


def test_a_whole_stream_whose_only_finish_is_unreadable_is_relayed_and_not_stored(
    gw: Gateway, up: Scripted, tenant: tuple[str, str]
) -> None:
    # `"choices": 5` hides the finish reason. The upstream said [DONE], so the stream
    # is whole and ends for the client as it would directly (an error event appended
    # made the OpenAI SDK raise); the gateway could not read why it finished, so it is
    # not stored. A stream cut before [DONE] still ends with an error event
    # (test_upstream_sse.py).
    parts = [ROLE, HELLO, raw_chunk(5)]
    got, label, calls = relayed_then_asked_again(
        gw, up, tenant[1], CHAT, ask(f"Unreadable finish {SECRET}", stream=True), parts
    )
    assert got == b"".join(parts) + DONE
    assert (label, calls) == ("miss", 2)


# ----------------------------------------------------------------- error events


@pytest.mark.parametrize(
    ("error", "message"),
    [
        ("upstream overloaded", "the upstream failed: upstream overloaded"),
        (True, "the upstream failed: it sent an error event"),
        (5, "the upstream failed: it sent an error event"),
        ([SECRET], "the upstream failed: it sent an error event"),
        ("  ", "the upstream failed: it sent an error event"),
        ("\udc00 " + SECRET, "the upstream failed: it sent an error event"),  # strict JSON refuses
        ("x" * 500, "the upstream failed: " + "x" * 200),
    ],
    ids=["string", "true", "number", "list", "blank", "lone-surrogate", "long"],
)
def test_an_error_event_that_is_not_an_object_is_a_502_in_the_openai_shape(
    gw: Gateway,
    up: Scripted,
    tenant: tuple[str, str],
    caplog: pytest.LogCaptureFixture,
    error: Any,
    message: str,
) -> None:
    Counted(up, b"data: " + json.dumps({"error": error}).encode() + b"\n\n")
    with caplog.at_level("DEBUG"), gw.http(tenant[1]) as http:
        r = http.post(CHAT, json=ask(f"odd error event {SECRET}", stream=True))
    err = assert_openai_error(r, 502, "upstream_error")
    assert err == {"message": message, "type": "upstream_error", "param": None, "code": None}
    assert SECRET not in r.text and SECRET not in caplog.text


def test_an_error_event_that_is_an_object_stays_the_upstreams(
    gw: Gateway, up: Scripted, tenant: tuple[str, str]
) -> None:
    Counted(up, b"data: " + json.dumps(OVERLOADED).encode() + b"\n\n")
    with gw.http(tenant[1]) as http:
        r = http.post(CHAT, json=ask("an error object", stream=True))
    assert r.status_code == 502, r.text
    assert r.json() == OVERLOADED


def test_an_upstream_error_string_goes_to_the_client_only(
    gw: Gateway, up: Scripted, tenant: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    # The upstream's words, even when they quote the prompt, are the client's to see:
    # in the body, never in a log line or a header.
    Counted(up, b'data: {"error":"bad prompt: ' + SECRET.encode() + b'"}\n\n')
    with caplog.at_level("DEBUG"), gw.http(tenant[1]) as http:
        r = http.post(CHAT, json=ask(f"echoed {SECRET}", stream=True))
    err = assert_openai_error(r, 502, "upstream_error")
    assert err["message"] == f"the upstream failed: bad prompt: {SECRET}"
    assert SECRET not in caplog.text and all(SECRET not in v for v in r.headers.values())


@pytest.mark.parametrize("error", ["object", "string"])
def test_an_error_event_mid_stream_is_forwarded_as_the_upstream_wrote_it(
    gw: Gateway, up: Scripted, tenant: tuple[str, str], error: str
) -> None:
    failed = OVERLOADED if error == "object" else {"error": "upstream overloaded"}
    bad = b"data: " + json.dumps(failed).encode() + b"\n\n"
    Counted(up, ROLE, HELLO, bad)
    with gw.http(tenant[1]) as http:
        r = http.post(CHAT, json=ask(f"failed mid-stream {error}", stream=True))
    assert r.status_code == 200, r.text
    assert r.content == ROLE + HELLO + bad + DONE


@pytest.mark.parametrize(
    "error", [None, False, 0, "", {}, []], ids=["null", "false", "zero", "empty", "object", "list"]
)
def test_a_falsy_error_on_a_chunk_is_no_error(
    gw: Gateway, up: Scripted, tenant: tuple[str, str], error: Any
) -> None:
    parts = [
        event({"role": "assistant", "content": ""}, error=error),
        event({"content": "Paris is the capital of France."}, error=error),
        event({}, "stop", error=error),
    ]
    question = f"Which city is the capital of France? (error {json.dumps(error)})"
    got, label, calls = relayed_then_asked_again(
        gw, up, tenant[1], CHAT, ask(question, stream=True), parts
    )
    assert got == b"".join(parts) + DONE
    assert (label, calls) == ("semantic-hit", 1)  # an ordinary answer, stored


@pytest.mark.parametrize("usage", ["control", "string", "list"])
def test_a_usage_that_is_not_an_object_is_no_usage(
    gw: Gateway, up: Scripted, tenant: tuple[str, str], usage: str
) -> None:
    # Its counts cannot be read: stored, its hits would report (and count saved) 0 tokens.
    value = {"control": _COUNTS, "string": "14 tokens", "list": [9, 5]}[usage]
    odd = b"data: " + json.dumps({"id": "c1", "choices": [], "usage": value}).encode() + b"\n\n"
    parts = [ROLE, HELLO, STOP]
    upstream = Counted(up, *parts, odd, DONE)
    body = ask(f"What is the capital of France? (usage {usage})", stream=True)
    with gw.http(tenant[1]) as http:
        first = http.post(CHAT, json=body)
        again = http.post(CHAT, json=body)
    assert first.content == b"".join(parts) + DONE  # the usage the gateway asked for, gone
    stored = usage == "control"
    assert again.headers["x-cachegate-cache"] == ("semantic-hit" if stored else "miss")
    assert upstream.calls == (1 if stored else 2)
