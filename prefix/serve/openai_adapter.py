"""OpenAI request → engine request: the prompt's token ids and validated sampling params.

Shared by the engine server and the gateway's in-process upstream, so both apply
the same defaults (temperature 1.0, max_tokens = what is left of the context,
capped at ``DEFAULT_MAX_TOKENS``) and the same validation before a stream starts.
"""

from __future__ import annotations

import asyncio
from typing import Any

from jinja2 import TemplateError
from pydantic import ValidationError

from prefix.errors import (
    InvalidSamplingParamsError,
    KVBudgetExceededError,
    NoFreeBlocksError,
    PromptTooLongError,
    RequestError,
)
from prefix.model.sampling import GREEDY_BELOW, SamplingParams
from prefix.model.tokenize import Prompt
from prefix.serve.async_engine import EngineDeadError
from prefix.serve.engine import PrefixEngine
from protocol.http import ApiError
from protocol.openai import (
    ChatCompletionRequest,
    CompletionRequest,
    validation_error_message,
)

DEFAULT_MAX_TOKENS = 256


def parse_request(body: dict[str, Any], chat: bool) -> ChatCompletionRequest | CompletionRequest:
    """Validate a body (strict types, unknown fields ignored); n must be 1."""
    schema = ChatCompletionRequest if chat else CompletionRequest
    try:
        req = schema.model_validate(body)
    except ValidationError as e:
        message, param = validation_error_message(e)
        raise ApiError(400, message, param=param) from None
    if req.n is not None and req.n != 1:
        raise ApiError(400, "n > 1 is not supported" if req.n > 1 else "n must be 1", param="n")
    return req


async def to_engine_request(
    engine: PrefixEngine,
    req: ChatCompletionRequest | CompletionRequest,
    namespace: str,
) -> tuple[list[int], SamplingParams]:
    """Tokenize and validate against the engine (length, KV budget) before any stream starts."""
    chat = isinstance(req, ChatCompletionRequest)
    prompt_param = "messages" if chat else "prompt"
    prompt: Prompt
    if isinstance(req, ChatCompletionRequest):
        if not engine.loaded.has_chat_template:
            raise ApiError(
                400, "this model has no chat template; use /v1/completions", param="messages"
            )
        prompt = req.prompt_messages()
    else:
        prompt = req.engine_prompt()
    try:
        token_ids = await asyncio.to_thread(engine.encoder.encode, prompt)
    except RequestError as e:
        raise engine_error(e, prompt_param) from None
    except (ValueError, TypeError, TemplateError) as e:  # the chat template refused it
        raise ApiError(400, f"cannot build the prompt: {e}", param=prompt_param) from None
    max_tokens = req.requested_max_tokens()
    if max_tokens is None:
        max_tokens = max(1, min(DEFAULT_MAX_TOKENS, engine.max_model_len - len(token_ids)))
    try:
        params = SamplingParams(
            max_tokens=max_tokens,
            temperature=temperature(req.temperature),
            top_p=1.0 if req.top_p is None else req.top_p,
            stop=req.stop_tuple(),
            seed=req.seed,
            ignore_eos=req.ignore_eos,
        )
        await asyncio.to_thread(engine.new_sequence, token_ids, params, namespace, req.cache_salt)
    except RequestError as e:
        raise engine_error(e, prompt_param) from None
    return token_ids, params


def temperature(value: float | None) -> float:
    if value is None:
        return 1.0  # the OpenAI default
    return 0.0 if 0.0 <= value < GREEDY_BELOW else value


_SAMPLING_PARAMS = ("max_tokens", "temperature", "top_p", "stop", "seed")


def engine_error(exc: BaseException, prompt_param: str = "messages") -> ApiError:
    if isinstance(exc, PromptTooLongError | KVBudgetExceededError):
        return ApiError(400, str(exc), param=prompt_param, code="context_length_exceeded")
    if isinstance(exc, InvalidSamplingParamsError):
        # Its messages start with the parameter's name ("top_p must be in (0, 1] ...").
        name = str(exc).split(" ", 1)[0]
        return ApiError(400, str(exc), param=name if name in _SAMPLING_PARAMS else None)
    if isinstance(exc, RequestError):
        return ApiError(400, str(exc), param=prompt_param)
    if isinstance(exc, NoFreeBlocksError):
        return ApiError(503, str(exc), type="server_error", code="overloaded")
    if isinstance(exc, EngineDeadError):
        return ApiError(503, str(exc), type="server_error", code="engine_dead")
    raise exc
