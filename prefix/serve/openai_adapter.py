"""Parsed OpenAI request → :class:`EngineRequest`, and engine errors → OpenAI errors.

Shared by the engine server and the gateway's in-process upstream, so both tokenize
once, apply the same defaults (``protocol.sampling.sampling_params``) and answer the
same errors. Validation against the model and the pool happens once, in
``AsyncEngine.submit``.
"""

from __future__ import annotations

from jinja2 import TemplateError

from prefix.core.request import EngineRequest
from prefix.errors import (
    EngineDeadError,
    InvalidSamplingParamsError,
    KVBudgetExceededError,
    NoFreeBlocksError,
    PromptTooLongError,
    QueueFullError,
    RequestError,
    StepFailedError,
)
from prefix.model.tokenize import CHAT_ROLES, Prompt
from prefix.serve.engine import PrefixEngine
from prefix.serve.prep_pool import in_prep_thread
from protocol.errors import ApiError
from protocol.openai import ChatCompletionRequest, CompletionRequest
from protocol.sampling import sampling_params


async def to_engine_request(
    engine: PrefixEngine,
    req: ChatCompletionRequest | CompletionRequest,
    namespace: str,
    *,
    request_id: str | None = None,
    kv_block_quota: int | None = None,
    quota_key: str | None = None,
    cache_kv: bool = True,
) -> EngineRequest:
    """Tokenize (in a worker thread) and fill in the sampling defaults."""
    chat = isinstance(req, ChatCompletionRequest)
    prompt_param = "messages" if chat else "prompt"
    refuse_unsupported(req)
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
        token_ids = await in_prep_thread(engine.encoder.encode, prompt)
    except RequestError as e:
        raise engine_error(e, prompt_param) from None
    except (ValueError, TypeError, TemplateError) as e:
        # The chat template refused the messages. Its words are not named: a template's
        # raise_exception (or the error it tripped) may quote a message's text, and
        # prompts never go into an error message (it is logged on the way).
        raise ApiError(
            400,
            f"the model's chat template cannot render these messages ({type(e).__name__}); "
            "check the roles and their order",
            param=prompt_param,
        ) from None
    try:
        budget = kv_block_quota * engine.block_size if kv_block_quota is not None else None
        params = sampling_params(req, len(token_ids), engine.max_model_len, budget)
    except InvalidSamplingParamsError as e:
        raise engine_error(e, prompt_param) from None
    return EngineRequest(
        token_ids=tuple(token_ids),
        params=params,
        namespace=namespace,
        cache_salt=req.cache_salt,
        request_id=request_id,
        kv_block_quota=kv_block_quota,
        quota_key=quota_key,
        cache_kv=cache_kv,
    )


_UNSUPPORTED = {
    "n": "n > 1 is not supported",
    "prompt": "several prompts in one request are not supported by this engine",
}


def refuse_unsupported(req: ChatCompletionRequest | CompletionRequest) -> None:
    """A 400 naming the first parameter this engine does not implement.

    Silently ignoring it would answer another question than the one asked (no tool
    call, no logprobs, plain text instead of JSON), and a client could not tell.
    """
    name = req.unsupported_field()
    if name is not None:
        raise ApiError(
            400,
            _UNSUPPORTED.get(name, f"the parameter '{name}' is not supported by this engine"),
            param=name,
            code="unsupported_parameter",
        )
    # As vLLM and OpenAI: options for a stream that will not be streamed are a client
    # error, not something to drop silently (the client would wait for a usage chunk).
    # `{}` passes, as in vLLM (an empty dict is falsy there).
    if not req.stream and req.stream_options is not None and req.stream_options.model_fields_set:
        raise ApiError(
            400,
            "'stream_options' is only allowed when 'stream' is true",
            param="stream_options",
        )
    if isinstance(req, ChatCompletionRequest):
        for i, message in enumerate(req.messages):
            # the roles its chat template renders (not the legacy "function": session 46,
            # it was named here as taken and then refused by the tokenizer)
            if message.role not in CHAT_ROLES:  # its name is the client's: not quoted
                raise ApiError(
                    400,
                    f"invalid value for 'messages.{i}.role': this engine takes "
                    + ", ".join(sorted(CHAT_ROLES)),
                    param="messages",
                )
            if message.non_text_part() is not None:
                raise ApiError(
                    400,
                    "content parts other than text are not supported by this engine",
                    param="messages",
                    code="unsupported_parameter",
                )


_SAMPLING_PARAMS = ("max_tokens", "temperature", "top_p", "top_k", "stop", "stop_token_ids", "seed")


def engine_error(exc: BaseException, prompt_param: str = "messages") -> ApiError:
    if isinstance(exc, PromptTooLongError | KVBudgetExceededError):
        return ApiError(400, str(exc), param=prompt_param, code="context_length_exceeded")
    if isinstance(exc, InvalidSamplingParamsError):
        # Its messages start with the parameter's name ("top_p must be in (0, 1] ...").
        name = str(exc).split(" ", 1)[0]
        return ApiError(400, str(exc), param=name if name in _SAMPLING_PARAMS else None)
    if isinstance(exc, RequestError):
        return ApiError(400, str(exc), param=prompt_param)
    if isinstance(exc, QueueFullError):
        return ApiError(
            429,
            str(exc),
            type="rate_limit_error",
            code="queue_full",
            headers={"Retry-After": str(exc.retry_after_s)},
        )
    if isinstance(exc, NoFreeBlocksError):
        return ApiError(503, str(exc), type="server_error", code="overloaded")
    if isinstance(exc, StepFailedError):
        # The engine lives on and a retry may well succeed; OpenAI clients retry 500s.
        return ApiError(500, str(exc), type="server_error", code="engine_step_failed")
    if isinstance(exc, EngineDeadError):
        return ApiError(503, str(exc), type="server_error", code="engine_dead")
    raise exc
