"""Errors raised by the prefix engine.

Hierarchy::

    PrefixError
    ├── EngineConfigError (also ValueError)    invalid EngineConfig / model settings
    ├── ModelLoadError                         model path missing, unsupported architecture
    ├── RequestError                           the request itself is bad (a 4xx upstream)
    │   ├── EmptyPromptError                   no tokens to process
    │   ├── PromptTooLongError                 prompt + max_tokens exceed the context window
    │   └── KVBudgetExceededError              the request can never fit in the KV pool
    ├── NoFreeBlocksError                      transient: not enough reclaimable KV blocks now
    ├── QueueFullError                         transient: the waiting queue is full (a 429)
    ├── KernelUnavailableError                 a native kernel cannot be built or run here
    ├── EngineDeadError (also RuntimeError)    the engine could not serve the request (a 5xx)
    │   └── StepFailedError                    the step computing it failed; the engine lives on
    └── TierError                              an L3 block store failed (never reaches a client)
        ├── TierUnavailableError               the store is down or slower than its timeout
        └── CorruptBlockError                  a stored block failed its checks (a miss)
            └── ForeignRecordError             another format version's record (a miss, kept)

``InvalidSamplingParamsError`` (max_tokens <= 0, temperature or top_p out of range) is
raised while building ``SamplingParams``, before a request reaches the engine: it lives
in ``protocol.errors`` and is re-exported here.

Every error carries a human-readable message; the gateway maps ``RequestError``
to HTTP 400, ``NoFreeBlocksError`` to 503 and ``EngineDeadError`` (with its
``StepFailedError``) to a 5xx in the OpenAI error shape.
"""

from __future__ import annotations

from protocol.errors import InvalidSamplingParamsError

__all__ = [
    "CorruptBlockError",
    "EmptyPromptError",
    "EngineConfigError",
    "EngineDeadError",
    "ForeignRecordError",
    "InvalidSamplingParamsError",
    "KVBudgetExceededError",
    "KernelUnavailableError",
    "ModelLoadError",
    "NoFreeBlocksError",
    "PrefixError",
    "PromptTooLongError",
    "QueueFullError",
    "RequestError",
    "StepFailedError",
    "TierError",
    "TierUnavailableError",
]


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


class NoFreeBlocksError(PrefixError):
    """Not enough reclaimable blocks right now; the caller may wait and retry."""


class QueueFullError(PrefixError):
    """Too many requests are waiting for admission; the caller should retry later."""

    retry_after_s = 1


class TierError(PrefixError):
    """An L3 block store failed; the engine treats it as a miss, never as a request error."""


class TierUnavailableError(TierError):
    """The store could not be reached, or did not answer within its timeout."""


class CorruptBlockError(TierError):
    """A stored block is truncated, altered, or from another model/layout/key."""


class ForeignRecordError(CorruptBlockError):
    """A record in another format version (an engine of another release sharing the
    store): a miss, but not damage, so it is left in place."""


class KernelUnavailableError(PrefixError):
    """A native kernel cannot be built or run here (no compiler, a CPU without the
    instructions it needs, an unsupported shape); ``auto`` falls back to SDPA."""


class EngineDeadError(PrefixError, RuntimeError):
    """The engine thread stopped (a bug or a device failure); requests cannot proceed."""


class StepFailedError(EngineDeadError):
    """The engine step computing this request raised; the request was ended, its KV
    blocks freed, and the engine carries on with other requests (a retry may succeed).

    A subclass of ``EngineDeadError`` so that every caller that already turns an engine
    failure into a 5xx (the gateway's in-process upstream, the engine server) does so
    for this one too; ``openai_adapter.engine_error`` gives it its own code.
    """
