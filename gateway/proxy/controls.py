"""What a client may say about caching and tracing besides its question.

* The ``Cache-Control`` header (``no-cache``, ``no-store``, ``max-age``/``s-maxage``)
  and the body's ``cache`` object as LiteLLM's users know it (``{"no-cache": true,
  "no-store": true, "ttl": 600, "s-maxage": 60, "namespace": "..."}``), merged into
  one :class:`CacheControl`. The ``cache`` object is taken out of the body before
  anything else sees it: it is neither part of the partition key (two requests that
  differ only in their cache controls ask the same question) nor forwarded (an
  upstream that rejects unknown fields would refuse it).
* The end user's identity for a ``user``-scoped tenant: the configured header if the
  operator named one and the request carries it, else the body's ``user`` field.
* ``X-Request-Id`` and W3C ``traceparent``/``tracestate``: kept when well formed,
  forwarded to the upstream and echoed to the client, so one id follows a request
  through every hop. A malformed one is replaced (request id) or dropped (trace),
  never echoed: a response header carries nothing the gateway has not checked.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from gateway.proxy.pipeline import CacheControl
from protocol.errors import ApiError

#: Keys of the body's ``cache`` object and the type each must have.
CACHE_KEYS: dict[str, type] = {
    "no-cache": bool,
    "no-store": bool,
    "ttl": int,
    "s-maxage": int,
    "max-age": int,
    "namespace": str,
}
MAX_NAMESPACE_CHARS = 128
MAX_USER_CHARS = 256

_REQUEST_ID = re.compile(r"[A-Za-z0-9._:/+=-]{1,128}")
_TRACEPARENT = re.compile(r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")
_TRACESTATE = re.compile(r"[\x21-\x7e ]{1,512}")


def take_cache_controls(body: dict[str, Any], header: str | None) -> CacheControl:
    """The merged controls; removes ``cache`` from ``body``. 400 on a malformed object."""
    cc = CacheControl.parse(header)
    if "cache" not in body:
        return cc
    obj = body.pop("cache")
    if obj is None:
        return cc
    if not isinstance(obj, dict):
        raise ApiError(400, "'cache' must be an object", param="cache")
    for key, value in obj.items():
        want = CACHE_KEYS.get(key)
        if want is None:
            known = ", ".join(CACHE_KEYS)
            raise ApiError(400, f"unknown key in 'cache'; known keys: {known}", param="cache")
        # bool is an int in Python: a flag given as 1, or a number given as true, is refused.
        if type(value) is not want:
            raise ApiError(400, f"'cache.{key}' must be a {want.__name__}", param=f"cache.{key}")
        if isinstance(value, int) and value < 0:
            raise ApiError(400, f"'cache.{key}' must be >= 0", param=f"cache.{key}")
    namespace = obj.get("namespace")
    if namespace is not None and not 1 <= len(namespace) <= MAX_NAMESPACE_CHARS:
        raise ApiError(
            400,
            f"'cache.namespace' must have 1 to {MAX_NAMESPACE_CHARS} characters",
            param="cache.namespace",
        )
    if obj.get("ttl") == 0:
        raise ApiError(400, "'cache.ttl' must be >= 1 (use no-store)", param="cache.ttl")
    ages = [a for a in (cc.max_age, obj.get("s-maxage"), obj.get("max-age")) if a is not None]
    return replace(
        cc,
        no_cache=cc.no_cache or obj.get("no-cache") is True,
        no_store=cc.no_store or obj.get("no-store") is True,
        max_age=min(ages) if ages else None,
        ttl=obj.get("ttl"),
        namespace=namespace,
    )


def end_user(headers: Mapping[str, str], body: Mapping[str, Any], header: str | None) -> str | None:
    """The end user's identity: the operator's header if set and present, else ``user``."""
    value: object = headers.get(header) if header else None
    if not value:
        value = body.get("user")
    if not isinstance(value, str) or not value:
        return None
    if len(value) > MAX_USER_CHARS:
        raise ApiError(
            400, f"the user identity is longer than {MAX_USER_CHARS} characters", param="user"
        )
    return value


@dataclass(frozen=True)
class Tracing:
    """The request id the client sees and the headers that follow the request upstream."""

    request_id: str
    forward: dict[str, str]  # to the upstream and back to the client

    @classmethod
    def from_headers(cls, headers: Mapping[str, str], generated: str) -> Tracing:
        given = headers.get("x-request-id")
        request_id = given if given and _REQUEST_ID.fullmatch(given) else generated
        forward = {"x-request-id": request_id}
        parent = headers.get("traceparent")
        if parent and _TRACEPARENT.fullmatch(parent):
            forward["traceparent"] = parent
            state = headers.get("tracestate")
            if state and _TRACESTATE.fullmatch(state):
                forward["tracestate"] = state
        return cls(request_id, forward)
