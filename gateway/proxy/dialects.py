"""What kind of server the upstream is, and what each kind may be sent.

A proxy must never make a working client worse, so the gateway adds to a
forwarded body only what the upstream is known to accept:

=============  ==============  ===========================  =========================  ========
dialect        ``cache_salt``  ``stream_options`` added     trusted-namespace headers  isolated
=============  ==============  ===========================  =========================  ========
``cachegate``  yes             yes (usage for the metrics)  yes, with the engine key   yes
``vllm``       yes             yes                          no                         yes
``sglang``     yes             yes                          no                         no
``openai``     no              no                           no                         no
=============  ==============  ===========================  =========================  ========

*Isolated*: the upstream's prefix cache is known to be narrowed per tenant by what
the gateway sends, so the ``cached_tokens`` it reports may reach the client;
elsewhere the client is told a cold cache (``gateway/proxy/cache_counts.py``), since
the count could say what other tenants sent. vLLM honours ``cache_salt`` from 0.9 (V1
engine). SGLang is sent the salt but is not taken as isolated: it accepted the field
from September 2025 (sgl-project/sglang#10718) and ignored it until a fix of April 2026
(#23300), and its LMCache integration still drops it (LMCache/LMCache#4825); an
operator who knows the server honours it sets ``CACHEGATE_UPSTREAM_CACHED_TOKENS=pass``.
Against a vLLM before 0.9, or a proxy in front of vLLM that drops unknown fields but
still names vLLM, set ``hide``.

``openai`` is the generic OpenAI-compatible server (a cloud API, llama.cpp, a
strict validator): it gets exactly the client's fields. Not even
``stream_options``: servers that predate it refuse it (Azure OpenAI before API
version 2024-09-01 answers 400 "Unrecognized request argument"), so asking would
break a working client. A stream from it carries token counts only when the
client asked for ``include_usage``; without them the answer is passed through
but not stored (``skipped:no_usage``, ``gateway/proxy/pipeline.py``), since its
hits would report 0 tokens and count nothing saved. ``cache_salt`` goes only
where it is honoured (our engine, vLLM ≥ 0.9 with prefix caching, SGLang); a cloud
API keys its cache by the gateway's one account, so there the gateway can only
keep the counts from the client. ``auto`` reads the dialect from the upstream's
``/v1/models``: every one of these servers names itself in the cards' ``owned_by``.

Not known is not generic: until ``auto`` has read a listing, a cachegate engine
sent the generic dialect would put every tenant in its shared namespace. So a
request that finds the dialect unknown reads the listing once itself; if it is
still unknown, it goes out as :data:`UNKNOWN`: the tenant's ``cache_salt``
(honoured by our engine, vLLM and SGLang, ignored by most others) and, with an engine
key, the trusted-namespace headers (a server ignores headers it does not know).
A strict server that refuses ``cache_salt`` with a 4xx naming it is neither of
the salted kinds: the request is sent again without it, and the upstream is
generic from then on (``HttpUpstream.stream``). A listing refused with a 4xx is
not decisive: a proxy in front of our engine can refuse it for a while (a deploy),
so the dialect stays unknown, and only the salt's refusal makes it generic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

DialectName = Literal["cachegate", "vllm", "sglang", "openai", "unknown"]
DIALECT_SETTINGS = ("auto", "cachegate", "vllm", "sglang", "openai")


@dataclass(frozen=True)
class Dialect:
    name: DialectName
    salted: bool  # honours `cache_salt` (prefix reuse narrowed per tenant)
    stream_usage: bool  # accepts `stream_options.include_usage`
    trusted_namespace: bool  # our engine: the namespace header with the engine key
    isolated: bool  # its prefix cache is narrowed per tenant: cached_tokens may be shown


DIALECTS: dict[str, Dialect] = {
    "cachegate": Dialect(
        "cachegate", salted=True, stream_usage=True, trusted_namespace=True, isolated=True
    ),
    "vllm": Dialect("vllm", salted=True, stream_usage=True, trusted_namespace=False, isolated=True),
    # Salted, but not known to isolate: SGLang accepted cache_salt for months while
    # ignoring it, and its LMCache integration drops it still (see the module doc).
    "sglang": Dialect(
        "sglang", salted=True, stream_usage=True, trusted_namespace=False, isolated=False
    ),
    "openai": Dialect(
        "openai", salted=False, stream_usage=False, trusted_namespace=False, isolated=False
    ),
}
GENERIC = DIALECTS["openai"]
# ``auto`` before any listing has answered: what keeps tenants apart on every server
# that could be behind it (see the module doc), and nothing a strict server refuses
# for good (a refused ``cache_salt`` is resent without it).
# Not isolated: what is behind it may ignore the salt.
UNKNOWN = Dialect(
    "unknown", salted=True, stream_usage=False, trusted_namespace=True, isolated=False
)


def detect(cards: Sequence[Any]) -> Dialect:
    """The dialect a ``/v1/models`` listing reveals (generic when it names no server we know)."""
    for card in cards:
        owner = card.get("owned_by") if isinstance(card, dict) else None
        if isinstance(owner, str) and owner.lower() in DIALECTS and owner.lower() != "openai":
            return DIALECTS[owner.lower()]
    return GENERIC


def dialect(name: str) -> Dialect | None:
    """The configured dialect, or None for ``auto`` (detected from the model list)."""
    if name == "auto":
        return None
    if name not in DIALECTS:
        raise ValueError(f"unknown upstream dialect {name!r}; one of {DIALECT_SETTINGS}")
    return DIALECTS[name]


def forward_body(body: dict[str, Any], d: Dialect, salt: str | None) -> tuple[dict[str, Any], bool]:
    """The body sent upstream, and whether a usage chunk was asked for on the client's
    behalf (then the gateway drops it again before the client sees the stream)."""
    out = dict(body)
    if salt is not None and d.salted:
        out["cache_salt"] = salt
    added_usage = False
    if out.get("stream") is True and d.stream_usage:
        options = out.get("stream_options")
        options = dict(options) if isinstance(options, dict) else {}
        if options.get("include_usage") is not True:
            out["stream_options"] = options | {"include_usage": True}
            added_usage = True
    return out, added_usage


def header_namespace(namespace: str) -> str:
    """The namespace as a header value: a sharing group an admin named in any script
    (``group:团队``) cannot go in a header as it is (httpx refused it: every request of
    the group failed), so what is not printable ASCII is percent-encoded, ``%`` too
    (two groups never share one value). Tenant ids are slugs: their namespaces go
    unchanged, and the KV the engine keyed by them stays reachable."""
    return quote(namespace, safe=_NAMESPACE_SAFE)


_NAMESPACE_SAFE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) != "%")
