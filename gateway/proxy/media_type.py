"""The Content-Type and status of an upstream's JSON answer, as the client gets them.

A proxy that does not need to change a header passes it on (gateway review, session
39): an upstream that answers ``application/json; charset=utf-8`` is answered to the
client with that charset, not with the bare ``application/json`` the gateway wrote
before, and a success other than 200 (a 201, a 203 from a caching proxy) keeps its
status. Only what means a JSON body passes: the gateway parsed the body as JSON,
so a ``text/html`` label would now be a lie, and a parameter other than ``charset``
or a value that is not a short token is not passed (headers are Latin-1, and an
upstream may echo the request into one); such a header is answered as the plain
``application/json`` the body is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

JSON = "application/json"
# application/json, or a JSON suffix type (RFC 6839), with at most a charset parameter.
_JSON_TYPE = re.compile(
    r"application/(?:[a-z0-9.+-]{1,40}\+)?json"
    r"(?:[ \t]*;[ \t]*charset=(?:[A-Za-z0-9._-]{1,40}|\"[A-Za-z0-9._-]{1,40}\"))?",
    re.IGNORECASE,
)


def json_media_type(headers: Mapping[str, str]) -> str:
    """The upstream's Content-Type when it names a JSON body in a form safe to pass
    on, else ``application/json``."""
    value = headers.get("content-type", "").strip()
    return value if _JSON_TYPE.fullmatch(value) else JSON


def success_status(status: int) -> int:
    """The status a whole answer goes back with: the upstream's own 2xx (a body was
    read, so a 204 or 205, which must have none, is answered as 200)."""
    return status if 200 <= status < 300 and status not in (204, 205) else 200
