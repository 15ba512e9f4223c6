"""Errors raised by the prefix engine.

Hierarchy::

    PrefixError
    ├── EngineConfigError (also ValueError)    invalid EngineConfig / model settings
    ├── ModelLoadError                         model path missing, unsupported architecture
    ├── RequestError                           the request itself is bad (a 4xx upstream)
    │   ├── EmptyPromptError                   no tokens to process
    │   ├── PromptTooLongError                 prompt + max_tokens exceed the context window
    │   ├── KVBudgetExceededError              the request can never fit in the KV pool
    │   └── InvalidSamplingParamsError         max_tokens <= 0, temperature < 0, top_p out of (0, 1]
    ├── NoFreeBlocksError                      transient: not enough reclaimable KV blocks now
    └── TierError                              an L3 block store failed (never reaches a client)
        ├── TierUnavailableError               the store is down or slower than its timeout
        └── CorruptBlockError                  a stored block failed its checks (a miss)

Every error carries a human-readable message; the gateway maps ``RequestError``
to HTTP 400 and ``NoFreeBlocksError`` to 503 in the OpenAI error shape.
"""

from __future__ import annotations


class PrefixError(Exception):
    """Base class of every error raised by ``prefix``."""


class EngineConfigError(PrefixError, ValueError):
    """An engine or model setting is invalid."""


class ModelLoadError(PrefixError):
    """The model could not be loaded (missing path, unsupported architecture)."""


class RequestError(PrefixError):
    """The request is invalid; retrying it unchanged cannot succeed."""


class EmptyPromptError(RequestError):
    """The prompt tokenized to zero tokens."""


class PromptTooLongError(RequestError):
    """The prompt (plus the tokens it asks for) exceeds the model's context window."""


class KVBudgetExceededError(RequestError):
    """The request needs more KV blocks than the whole pool has."""


class InvalidSamplingParamsError(RequestError):
    """A sampling parameter is out of range."""


class NoFreeBlocksError(PrefixError):
    """Not enough reclaimable blocks right now; the caller may wait and retry."""


class TierError(PrefixError):
    """An L3 block store failed; the engine treats it as a miss, never as a request error."""


class TierUnavailableError(TierError):
    """The store could not be reached, or did not answer within its timeout."""


class CorruptBlockError(TierError):
    """A stored block is truncated, altered, or from another model/layout/key."""
