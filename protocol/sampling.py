"""What to generate: sampling parameters, validated on construction (torch-free).

The engine's ``Sampler`` (``prefix/model/sampling.py``) consumes them; the gateway
and the engine server build them from a parsed OpenAI request with
:func:`sampling_params`, so both apply the same defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from protocol.errors import InvalidSamplingParamsError

if TYPE_CHECKING:
    from protocol.openai import ChatCompletionRequest, CompletionRequest

# Below this, logits / temperature overflows to inf and softmax to NaN; the distribution
# is a point mass anyway, so such temperatures are greedy.
GREEDY_BELOW = 1e-5
# As the OpenAI API: at most 4 stop sequences; each is bounded so the per-step stop
# check costs O(output tail), whatever a client sends.
MAX_STOP_SEQUENCES = 4
MAX_STOP_CHARS = 256
#: A bound on ``stop_token_ids`` (each is checked at every step: a set lookup).
MAX_STOP_TOKEN_IDS = 1024


@dataclass(frozen=True)
class SamplingParams:
    """What to generate. Validated on construction; bad values raise InvalidSamplingParamsError."""

    max_tokens: int = 64
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0  # 0: every token (vLLM's -1 and 0 are read as 0)
    stop: tuple[str, ...] = ()
    seed: int | None = None
    ignore_eos: bool = False
    stop_token_ids: tuple[int, ...] = field(default=())

    def __post_init__(self) -> None:
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int):
            raise InvalidSamplingParamsError(
                f"max_tokens must be an integer, got {self.max_tokens!r}"
            )
        if self.max_tokens <= 0:
            raise InvalidSamplingParamsError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if not (0.0 <= self.temperature <= 2.0) or self.temperature != self.temperature:
            raise InvalidSamplingParamsError(
                f"temperature must be in [0, 2], got {self.temperature}"
            )
        if self.seed is not None and not (-(2**63) <= self.seed < 2**64):
            raise InvalidSamplingParamsError(f"seed must be in [-2**63, 2**64), got {self.seed}")
        if not (0.0 < self.top_p <= 1.0):
            raise InvalidSamplingParamsError(f"top_p must be in (0, 1], got {self.top_p}")
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 0:
            raise InvalidSamplingParamsError(
                "top_k must be an integer: -1 or 0 for every token, or at least 1"
            )
        if len(self.stop_token_ids) > MAX_STOP_TOKEN_IDS or any(
            isinstance(t, bool) or not isinstance(t, int) or t < 0 for t in self.stop_token_ids
        ):
            raise InvalidSamplingParamsError(
                f"stop_token_ids must be at most {MAX_STOP_TOKEN_IDS} token ids (integers >= 0)"
            )
        if any(not isinstance(s, str) or s == "" for s in self.stop):
            raise InvalidSamplingParamsError("stop strings must be non-empty strings")
        if len(self.stop) > MAX_STOP_SEQUENCES:
            raise InvalidSamplingParamsError(f"stop may hold at most {MAX_STOP_SEQUENCES} strings")
        if any(len(s) > MAX_STOP_CHARS for s in self.stop):
            raise InvalidSamplingParamsError(
                f"stop strings may be at most {MAX_STOP_CHARS} characters each"
            )

    @property
    def is_greedy(self) -> bool:
        return self.temperature < GREEDY_BELOW


def temperature(value: float | None) -> float:
    """The OpenAI default (1.0) when absent; tiny positive values are greedy."""
    if value is None:
        return 1.0
    return 0.0 if 0.0 <= value < GREEDY_BELOW else value


def sampling_params(
    req: ChatCompletionRequest | CompletionRequest,
    num_prompt_tokens: int,
    max_model_len: int,
    token_budget: int | None = None,
) -> SamplingParams:
    """The request's sampling parameters, with the server defaults filled in.

    Without a client limit a request generates up to what is left of the context
    window, as vLLM and the OpenAI API do: a server-side cap would cut ordinary
    answers short (``finish_reason: length``), and a cut answer is never cached.
    ``token_budget`` (prompt + output tokens a KV quota allows) narrows that default,
    so a quota-bound tenant is not refused for a limit it never asked for.
    """
    max_tokens = req.requested_max_tokens()
    if max_tokens is None:
        room = max_model_len - num_prompt_tokens
        if token_budget is not None:
            room = min(room, token_budget - num_prompt_tokens)
        max_tokens = max(1, room)
    return SamplingParams(
        max_tokens=max_tokens,
        temperature=temperature(req.temperature),
        top_p=1.0 if req.top_p is None else req.top_p,
        top_k=_top_k(req.top_k),
        stop=req.stop_tuple(),
        seed=req.seed,
        ignore_eos=req.ignore_eos,
        stop_token_ids=_stop_token_ids(req.stop_token_ids),
    )


def _whole(value: Any) -> Any:
    """``50.0`` for a count is 50, as vLLM reads it (``protocol/openai.py``)."""
    if isinstance(value, float) and value.is_integer() and abs(value) <= 2**53:
        return int(value)
    return value


def _top_k(value: Any) -> Any:
    """vLLM's ``top_k`` (None, -1 and 0: every token); a bad value is left for
    :class:`SamplingParams` to refuse."""
    value = _whole(value)
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value == -1):
        return 0
    return value


def _stop_token_ids(value: Any) -> tuple[Any, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise InvalidSamplingParamsError("stop_token_ids must be a list of token ids")
    return tuple(_whole(v) for v in value)
