"""Header names the gateway and the engine server agree on (torch-free).

The trusted-namespace pair: the gateway sends the tenant's prefix namespace in
``x-cachegate-namespace`` together with the shared engine key in
``x-cachegate-engine-key``; the engine honours the namespace only when the key
matches (``prefix/serve/trusted_namespace.py``), else it runs the request in
``DEFAULT_NAMESPACE``. The gateway never gives a tenant that namespace.
``x-cachegate-kv-reuse: off`` marks a request whose KV nothing can reuse.
"""

from __future__ import annotations

NAMESPACE_HEADER = "x-cachegate-namespace"
KEY_HEADER = "x-cachegate-engine-key"
# "off": the request's namespace is its own alone (an end user without an identity
# under a tenant's prefix_scope "user"), so no later request can reuse its KV: the
# engine neither looks its blocks up nor keeps them (in its pool or its KV tiers),
# where they would only push out blocks that are reused. It can only narrow caching,
# so the engine honours it whoever sends it.
KV_REUSE_HEADER = "x-cachegate-kv-reuse"
# With the key too: whose request it is (an opaque digest of the tenant) and the
# tenant's KV block quota. The engine shares its running slots and waiting queue per
# tenant; keyed by the namespace alone, a tenant whose end users each have a namespace
# of their own (prefix_scope "user") counted as one tenant per user.
TENANT_HEADER = "x-cachegate-tenant"
QUOTA_HEADER = "x-cachegate-kv-block-quota"
DEFAULT_NAMESPACE = "default"
REQUEST_ID_HEADER = "x-request-id"

# What a response header value may carry: reasons, kinds, numbers and the separators
# between them. Anything else (user text, a URL, a path) becomes "_" before it can
# reach a header, so a Latin-1-only header line can never fail to encode and never
# echoes a prompt.
_TOKEN_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-")
MAX_TOKEN_CHARS = 64


def header_token(value: object) -> str:
    """``value`` reduced to a short ASCII token (at most ``MAX_TOKEN_CHARS``).

    Every ``x-cachegate-*`` response header goes through this. Characters outside
    ``[A-Za-z0-9._:-]`` become ``_`` and runs of them collapse, so a reason such as
    ``uncacheable:question has 412 tokens…`` cannot smuggle the question out.
    """
    out: list[str] = []
    for ch in str(value)[: MAX_TOKEN_CHARS * 4]:
        c = ch if ch in _TOKEN_CHARS else "_"
        if c == "_" and out and out[-1] == "_":
            continue
        out.append(c)
    token = "".join(out)[:MAX_TOKEN_CHARS].strip("_")
    return token or "none"


def safe_headers(headers: dict[str, str]) -> dict[str, str]:
    """``headers`` with every ``x-cachegate-*`` value passed through :func:`header_token`:
    the one gate between what the gateway decided and the header lines it sends."""
    return {
        k: header_token(v) if k.lower().startswith("x-cachegate-") else v
        for k, v in headers.items()
    }
