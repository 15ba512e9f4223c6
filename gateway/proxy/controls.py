"""What a client may say about caching and tracing besides its question.

* The ``Cache-Control`` header (``no-cache``, ``no-store``, ``max-age``/``s-maxage``)
  and the body's ``cache`` object as LiteLLM's users know it (``{"no-cache": true,
  "no-store": true, "ttl": 600, "s-maxage": 60, "namespace": "..."}``), merged into
  one :class:`CacheControl`. The ``cache`` object is taken out of the body before
  anything else sees it: it is neither part of the partition key (two requests that
  differ only in their cache controls ask the same question) nor forwarded (an
  upstream that rejects unknown fields would refuse it).
* What the controls make of the tenant's policy for one request: the partition's
  namespace (:func:`semantic_namespace`, only ever narrowed) and the policy
  (:func:`request_policy`, a TTL only ever shortened).
* The end user's identity for a ``user``-scoped tenant: the configured header if the
  operator named one and the request carries it, else the body's ``user`` field.
* ``X-Request-Id`` and W3C ``traceparent``/``tracestate``: kept when well formed,
  forwarded to the upstream and echoed to the client, so one id follows a request
  through every hop. A malformed one is replaced (request id) or dropped (trace),
  never echoed: a response header carries nothing the gateway has not checked.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from gateway.policy import MAX_INT32
from gateway.tenants import TenantContext
from protocol.errors import ApiError
from protocol.http import header_int
from semantic import SemanticPolicy


@dataclass(frozen=True)
class CacheControl:
    """One request's cache controls (``Cache-Control`` header and the body's ``cache``
    object, merged by ``gateway/proxy/controls.py``).

    ``no_cache`` skips the lookup, ``no_store`` the backfill; ``max_age`` accepts only
    entries younger than that many seconds; ``ttl`` shortens the stored entry's life
    (never beyond the tenant's TTL); ``namespace`` narrows the lookup and the store to
    a sub-partition of the caller's own tenant (it can never reach another tenant).
    """

    no_cache: bool = False
    no_store: bool = False
    max_age: int | None = None
    ttl: int | None = None
    namespace: str | None = None

    @classmethod
    def parse(cls, header: str | None) -> CacheControl:
        no_cache = no_store = False
        max_age: int | None = None
        for raw in (header or "").split(","):
            name, _, value = raw.strip().lower().partition("=")
            no_cache |= name == "no-cache" and not value
            no_store |= name == "no-store" and not value
            # ASCII digits only (header_int): "max-age=²" is no age, and never a 500.
            age = header_int(value.strip('"')) if name in ("max-age", "s-maxage") else None
            if age is not None:
                # Several age bounds: the strictest wins, as for any shared cache.
                max_age = age if max_age is None else min(max_age, age)
        return cls(no_cache=no_cache, no_store=no_store, max_age=max_age)


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
        if isinstance(value, int) and value > MAX_INT32:
            # As the policy's ttl_seconds: past it an expiry date overflows (the answer
            # was never stored) and PostgreSQL's 32-bit column refuses it.
            raise ApiError(400, f"'cache.{key}' must be at most {MAX_INT32}", param=f"cache.{key}")
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
    """The end user's identity: the operator's header when one is configured, else the
    body's ``user``. A configured header is the only source: it is set by a proxy that
    authenticated the user, and the body is the client's to write, so a request
    without the header (or with it empty) has no user, never the ``user`` it claims."""
    value: object = headers.get(header) if header else body.get("user")
    if not isinstance(value, str) or not value:
        return None
    if len(value) > MAX_USER_CHARS:
        raise ApiError(
            400, f"the user identity is longer than {MAX_USER_CHARS} characters", param="user"
        )
    return value


def semantic_namespace(ctx: TenantContext, cc: CacheControl, user: str | None) -> str:
    """The partition's namespace: always the caller's own tenant, narrowed (never
    widened) by the tenant's user scope and the client's ``cache.namespace``.

    A JSON list keeps the parts unambiguous whatever characters a client sends.
    """
    parts: list[str] = [ctx.semantic_namespace]
    if ctx.policy.semantic_scope == "user":
        parts += ["user", user or ""]
    if cc.namespace is not None:
        parts += ["client", cc.namespace]
    return parts[0] if len(parts) == 1 else json.dumps(parts, ensure_ascii=False)


def request_policy(ctx: TenantContext, cc: CacheControl, *, lookup: bool = False) -> SemanticPolicy:
    """The tenant's policy with this request's controls: ``max-age`` bounds what may be
    served, ``ttl`` can only shorten how long the answer is kept. For a ``lookup`` the
    TTL stays the tenant's: it also bounds the age of what is served (a TTL lowered
    after an entry was stored applies to it), and the client's ``ttl`` speaks only of
    its own answer."""
    sem = ctx.policy.semantic_policy()
    ttl = sem.ttl_seconds
    if cc.ttl is not None and not lookup:
        ttl = cc.ttl if ttl is None else min(ttl, cc.ttl)
    return replace(sem, ttl_seconds=ttl, max_age_seconds=cc.max_age)


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


def request_id(request: Any) -> str:
    """The request id of one request, for every response to it, errors included: the
    one the route chose (``Tracing``, kept on ``request.state``), else the client's
    X-Request-Id when well formed, else a new one, remembered for the request."""
    state = request.state
    chosen = getattr(state, "request_id", None)
    if isinstance(chosen, str):
        return chosen
    given = request.headers.get("x-request-id")
    chosen = given if given and _REQUEST_ID.fullmatch(given) else f"req-{uuid.uuid4().hex}"
    state.request_id = chosen
    return chosen
