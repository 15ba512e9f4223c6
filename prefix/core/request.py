"""One request as the engine runs it, built once and carried unchanged (torch-free).

The engine server and the gateway's in-process upstream both turn a parsed OpenAI
body into an :class:`EngineRequest` exactly once (tokenized, sampling parameters
validated, identity attached); ``PrefixEngine.new_sequence`` validates it against
the model and the pool and derives the chain root once; the ``AsyncEngine`` queues
the resulting sequence. Nothing downstream re-parses, re-tokenizes or re-hashes.
"""

from __future__ import annotations

from dataclasses import dataclass

from prefix.core.hashing import Extra
from protocol.headers import DEFAULT_NAMESPACE
from protocol.sampling import SamplingParams


@dataclass(frozen=True)
class EngineRequest:
    """Tokens, what to generate, and whose cache it may reuse."""

    token_ids: tuple[int, ...]
    params: SamplingParams
    namespace: str = DEFAULT_NAMESPACE  # the tenant's prefix namespace (never from a client)
    cache_salt: str | None = None  # narrows reuse further, on top of the namespace
    extras: tuple[Extra, ...] = ()  # typed extras mixed into every block key (LoRA)
    request_id: str | None = None
    # Requests sharing a quota key (default: the namespace) hold at most this many KV
    # blocks at once; a request that alone needs more is refused.
    kv_block_quota: int | None = None
    quota_key: str | None = None
    # False: the namespace is this request's alone (no later request shares it), so its
    # blocks are neither looked up nor kept for reuse, in the pool or the KV tiers.
    cache_kv: bool = True

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def tenant_key(self) -> str:
        """Whose request this is, for fair sharing; anonymous ("default") is nobody's."""
        if self.quota_key:
            return self.quota_key
        return "" if self.namespace == DEFAULT_NAMESPACE else self.namespace
