"""The request id an upstream engine is sent: the client's, made unique per request.

vLLM takes a request's ``X-Request-Id`` header (or its body's ``request_id``) as the
key its engine delivers output by, and SGLang its body's ``rid``. A client-chosen id
sent on as it came lets two requests hold one key: another tenant's, guessed or
reused, or one's own whose abort the engine has not handled yet. vLLM refuses the
second as "already running" or, in versions up to late 2025, crashes its engine or
races the abort (vllm#10583, #15041, #27987): one tenant could fail another's
requests, or stop the engine every tenant shares (a review, session 45). So each
upstream request carries the client's id with a random suffix, in the header and in
those body fields when the client set them; the client's id stays in front, for
correlation, and the gateway's answer echoes it unchanged (the in-process engine does
the same: ``gateway/proxy/inprocess.py``).
"""

from __future__ import annotations

import uuid
from typing import Any

#: Body fields an upstream engine keys a request by: vLLM's, SGLang's.
REQUEST_KEY_FIELDS = ("request_id", "rid")


def unique_suffix() -> str:
    return uuid.uuid4().hex


def upstream_request_id(client_id: str, suffix: str) -> str:
    """The id an upstream is sent for the request the client calls ``client_id``."""
    return f"{client_id}.{suffix}"


def with_unique_keys(body: dict[str, Any], suffix: str) -> dict[str, Any]:
    """``body`` with each request key the client set made unique (a string, or a list
    of strings: SGLang's batch ``rid``); a key of another type goes as it came, for the
    upstream to refuse. A body without them is returned as it is."""
    out = body
    for field in REQUEST_KEY_FIELDS:
        value = body.get(field)
        if isinstance(value, str):
            unique: Any = upstream_request_id(value, suffix)
        elif isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            unique = [upstream_request_id(v, f"{suffix}.{i}") for i, v in enumerate(value)]
        else:
            continue
        out = (out if out is not body else dict(body)) | {field: unique}
    return out
