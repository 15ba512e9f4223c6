"""The upstream response headers a client gets (``passed_headers``): what an OpenAI
client reads to pace itself or to report a problem, each value only when it has the
form such a header has. The upstream's account limits among them are hidden where
they would tell of other tenants (cache_counts.py ``hide_shared_headers``)."""

from __future__ import annotations

import re

import httpx

# Upstream response headers the client gets: what an OpenAI client reads to pace
# itself (rate limits, back-off) or to report a problem (timing, version, the
# upstream's request id). Everything else the upstream says about itself (server,
# cookies, its addresses) stays behind the gateway.
PASSED_HEADERS = frozenset(
    {"retry-after", "retry-after-ms", "openai-processing-ms", "openai-version"}
)
PASSED_PREFIXES = ("x-ratelimit-",)
# The gateway's own X-Request-Id is the one the client sees; an upstream id that is
# not just ours echoed back travels under this name instead (for support tickets).
UPSTREAM_REQUEST_ID = "x-upstream-request-id"
MAX_PASSED_HEADERS = 16
MAX_PASSED_VALUE = 256
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")
# What each passed header may say (printable ASCII of the right length was not enough:
# an upstream echoing the request into one put user text in a response header).
_NUMBER = re.compile(r"[0-9]{1,15}(?:\.[0-9]{1,6})?")
_HTTP_DATE = re.compile(r"[A-Z][a-z]{2}, [0-9]{2} [A-Z][a-z]{2} [0-9]{4} [0-9:]{8} GMT")
_RETRY_AFTER = re.compile(f"{_NUMBER.pattern}|{_HTTP_DATE.pattern}")
_DURATION = re.compile(r"[0-9.]{1,12}(?:[a-z]{1,2}[0-9.]{0,12}){0,4}")  # 60, 1s, 6m0s, 20ms
_VERSION = re.compile(r"[0-9A-Za-z.-]{1,32}")  # 2020-10-01
_ID = re.compile(r"[A-Za-z0-9._:/+=-]{1,128}")  # as the gateway's own request ids


def _pattern_for(name: str) -> re.Pattern[str]:
    if name.startswith(PASSED_PREFIXES):
        return _DURATION
    return {
        "retry-after": _RETRY_AFTER,
        "retry-after-ms": _NUMBER,
        "openai-processing-ms": _NUMBER,
        "openai-version": _VERSION,
    }.get(name, _ID)


def passed_headers(response: httpx.Response, request_id: str) -> dict[str, str]:
    """The allowlisted headers of an upstream response, safe to put on the client's.

    Values must be short printable ASCII: anything else (a value that would not
    encode as Latin-1, or text long enough to be content) is dropped, not mended.
    """
    out: dict[str, str] = {}
    for raw_name, raw_value in response.headers.raw:
        name = raw_name.decode("latin-1").lower()
        if not set(name) <= _NAME_CHARS:
            continue
        if name == "x-request-id":
            name = UPSTREAM_REQUEST_ID
        elif name not in PASSED_HEADERS and not name.startswith(PASSED_PREFIXES):
            continue
        try:
            value = raw_value.decode("ascii").strip()
        except UnicodeDecodeError:
            continue
        if not value or len(value) > MAX_PASSED_VALUE or not _pattern_for(name).fullmatch(value):
            continue  # only what such a header means: an upstream echoing text is dropped
        if name == UPSTREAM_REQUEST_ID and value == request_id:
            continue  # our own id echoed back: the client has it already
        if name not in out and len(out) < MAX_PASSED_HEADERS:
            out[name] = value
    return out
