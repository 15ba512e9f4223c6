"""A stream the upstream stopped after its finish reason but before ``data: [DONE]``
(its usage chunk, or another choice, may be what is missing) ends for the client as
the upstream ended it, without a ``[DONE]`` the gateway would make up, and is never
stored (a review, session 40: the gateway wrote its own [DONE], and the answer was
backfilled and served to the next paraphrase).
"""

from __future__ import annotations

import json
import time
from typing import Any

from fastapi import Request
from fastapi.responses import Response

from tests.gateway.conftest import Gateway
from tests.gateway.proxy.relay.support import CHAT, MODEL, Scripted, ask, chunk, entries

USAGE = {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}


def final(**top: Any) -> str:
    choice = {"index": 0, "delta": {}, "finish_reason": "stop", "logprobs": None}
    body = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": MODEL}
    return "data: " + json.dumps(body | {"choices": [choice]} | top) + "\n\n"


def streams(up: Scripted, *events: str) -> None:
    async def handler(_body: dict[str, Any], _request: Request) -> Response:
        return Response("".join(events), media_type="text/event-stream")

    up.handler = handler


def test_a_stream_cut_before_done_ends_so_and_is_not_stored(
    gw: Gateway, up: Scripted, tenant: tuple[str, str]
) -> None:
    tenant_id, key = tenant
    before = entries(gw, tenant_id)
    head = (chunk({"role": "assistant", "content": ""}), chunk({"content": "A cut answer."}))
    streams(up, *head, final(usage=USAGE))  # no [DONE]: the connection just closes
    question = ask("Where does a stream cut before its end go?", stream=True)
    with gw.http(key) as http:
        r = http.post(CHAT, json=question | {"stream_options": {"include_usage": True}})
    assert r.status_code == 200, r.text
    assert "A cut answer." in r.text
    assert "[DONE]" not in r.text  # as the upstream ended it
    time.sleep(0.3)
    assert entries(gw, tenant_id) == before  # never stored
    # the control: the same stream with its [DONE] is whole, ends so, and is stored
    streams(up, *head, final(usage=USAGE), "data: [DONE]\n\n")
    with gw.http(key) as http:
        whole = http.post(CHAT, json=question | {"stream_options": {"include_usage": True}})
    assert whole.text.endswith("data: [DONE]\n\n")
    deadline = time.monotonic() + 5
    while entries(gw, tenant_id) == before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert entries(gw, tenant_id) == before + 1
