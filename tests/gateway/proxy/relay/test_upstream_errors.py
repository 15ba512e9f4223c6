"""Error bodies of other shapes than OpenAI's, and refusals of the gateway's own key.

SGLang and vLLM before 0.10 write a flat error (``{"object": "error", "message": …}``),
TGI a bare string, FastAPI ``{"detail": …}``: the client gets OpenAI's shape with the
upstream's fields, its string, or (a validation list quoting the request) a fixed
message. A 401 or 403 refuses the gateway's upstream key, which the client cannot
fix: a 502 that shows none of the upstream's words (they may quote the key).
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import Request
from fastapi.responses import JSONResponse, Response

from tests.gateway.conftest import Gateway, assert_openai_error
from tests.gateway.proxy.relay.support import CHAT, RATE_LIMITED, Scripted, ask

SECRET = "private-user-text"
CONTEXT = (
    "This model's maximum context length is 4096 tokens. However, you requested 5000 "
    "tokens (4900 in the messages, 100 in the completion). Please reduce the length of "
    "the messages or completion."
)


def refuse(up: Scripted, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
    async def handler(_: dict[str, Any], request: Request) -> Response:
        return JSONResponse(body, status_code=status, headers=headers)

    up.handler = handler


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_upstream_key_is_a_502_without_the_upstreams_words(
    gw: Gateway, up: Scripted, tenant: tuple[str, str], status: int
) -> None:
    said = {
        "error": {
            "message": "Incorrect API key provided: sk-upst****abcd.",
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_api_key",
        }
    }
    refuse(up, status, said)
    with gw.http(tenant[1]) as http:
        r = http.post(CHAT, json=ask(f"Refused key {SECRET}"))
        # The control: the same body as a 400 is the client's, and goes back as it came.
        refuse(up, 400, said)
        control = http.post(CHAT, json=ask("Refused request"))
    err = assert_openai_error(r, 502, "upstream_error")
    assert err["code"] == "upstream_auth_failed"
    assert "sk-upst" not in r.text and SECRET not in r.text
    assert control.status_code == 400 and control.json() == said


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            {"object": "error", "message": CONTEXT, "type": "BadRequestError", "code": 400},
            {"message": CONTEXT, "type": "BadRequestError", "param": None, "code": 400},
        ),
        ({"error": "Input validation error: `inputs` must have less than 4096 tokens"}, None),
        ({"detail": "Not Found"}, None),
    ],
    ids=["flat", "tgi-string", "fastapi-detail"],
)
def test_other_error_shapes_keep_the_upstreams_fields_whole(
    gw: Gateway, up: Scripted, tenant: tuple[str, str], body: Any, expected: Any
) -> None:
    refuse(up, 400, body)
    with gw.http(tenant[1]) as http:
        r = http.post(CHAT, json=ask("Too long a question"))
    err = assert_openai_error(r, 400)
    if expected is not None:
        assert err == expected  # field by field, the message not cut
    else:
        assert err["message"] == next(iter(body.values()))


def test_a_validation_list_quoting_the_request_is_not_rendered(
    gw: Gateway, up: Scripted, tenant: tuple[str, str]
) -> None:
    detail = [{"loc": ["body", "messages", 0], "msg": "bad", "input": {"content": SECRET}}]
    refuse(up, 422, {"detail": detail})
    with gw.http(tenant[1]) as http:
        r = http.post(CHAT, json=ask(f"Quoted back {SECRET}"))
    assert_openai_error(r, 422)
    assert SECRET not in r.text


def test_retry_after_ms_reaches_the_client(
    gw: Gateway, up: Scripted, tenant: tuple[str, str]
) -> None:
    refuse(up, 429, RATE_LIMITED, {"retry-after": "2", "retry-after-ms": "1500"})
    with gw.http(tenant[1]) as http:
        r = http.post(CHAT, json=ask("How long should I wait?"))
    assert r.status_code == 429
    assert (r.headers["retry-after"], r.headers["retry-after-ms"]) == ("2", "1500")


def test_an_error_object_under_a_200_keeps_the_upstreams_object(
    gw: Gateway, up: Scripted, tenant: tuple[str, str]
) -> None:
    said = {"error": {"message": "model is loading", "type": "server_error", "code": 503}}
    refuse(up, 200, said)
    with gw.http(tenant[1]) as http:
        r = http.post(CHAT, json=ask("Asked while it loads"))
    assert r.status_code == 502  # not a 4xx code: the upstream's failure
    assert r.json() == said  # its object, not "the upstream's response has no choices"
