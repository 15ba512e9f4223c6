"""The subset of the OpenAI HTTP API cachegate reads (pydantic v2 models, torch-free).

The gateway and the engine server parse a body once with :func:`parse_request`;
response bodies and stream chunks are built by ``protocol/responses.py``.

Requests are validated in *strict* mode (``"5"`` is not an integer, ``true`` is not
a number) and unknown fields are ignored, as the OpenAI API does for fields it does
not know. The server turns a ``ValidationError`` into a 400 ``invalid_request_error``
with :func:`validation_error_message` (never FastAPI's 422).
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from protocol.errors import ApiError

#: What a request may ask of stop sequences before any upstream sees it (see
#: ``_bounded_stops``); the built-in engine takes fewer (protocol/sampling.py).
MAX_REQUEST_STOPS = 64
MAX_REQUEST_STOP_CHARS = 4096

#: The roles of the OpenAI API, the ones the built-in engine takes. A request may name
#: others (vLLM takes any string: Llama 3's ``ipython`` tool turns); they reach an HTTP
#: upstream as sent, which judges them, and the built-in engine refuses them.
Role = Literal["system", "user", "assistant", "tool", "developer", "function"]
KNOWN_ROLES: frozenset[str] = frozenset(get_args(Role))


class _Request(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)


class _Response(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ------------------------------------------------------------------ requests


class ContentPart(_Request):
    # Any part type is accepted here (image_url, input_audio, file, …), and none (vLLM's
    # ``{"image_url": …}`` shorthand): a gateway in front of a multimodal server
    # forwards them; our engine refuses non-text parts.
    type: str | None = None
    text: str | None = None


class ChatMessage(_Request):
    role: str = Field(min_length=1, max_length=256)  # see KNOWN_ROLES
    # A string, a list of content parts (text parts joined with "\n"), or null (an
    # assistant turn that only carried tool calls).
    content: str | list[ContentPart] | None = None

    def text(self) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(p.text or "" for p in self.content if p.type == "text")

    def non_text_part(self) -> str | None:
        """The type of the first part that is not text, if any ("untyped" for a part
        that names none)."""
        if isinstance(self.content, list):
            return next((p.type or "untyped" for p in self.content if p.type != "text"), None)
        return None


def _whole_float_is_int(value: Any) -> Any:
    """``100.0`` for a count means 100, as vLLM and SGLang read it (pydantic's lax ints);
    a client that works against them must not get a 400 here. ``100.5``, strings and
    booleans stay refused (strict mode), as do floats past 2**53, whose integer value is
    no longer the one the client wrote."""
    if isinstance(value, float) and value.is_integer() and abs(value) <= 2**53:
        return int(value)
    return value


def _null_is_false(value: Any) -> Any:
    """``null`` for a flag means its default, as OpenAI and vLLM read it (the spec
    marks ``stream`` and ``include_usage`` nullable); a client sending it must not get
    a 400 the upstream would not give."""
    return False if value is None else value


class StreamOptions(_Request):
    include_usage: bool = False

    _null_include_usage = field_validator("include_usage", mode="before")(_null_is_false)


#: The value of each sampling extension the built-in engine does not implement that
#: changes nothing (what vLLM defaults it to).
_NEUTRAL: dict[str, float | bool] = {
    "min_p": 0.0,
    "repetition_penalty": 1.0,
    "min_tokens": 0,
    "use_beam_search": False,
}


def _is_neutral(value: Any, neutral: float | bool) -> bool:
    if isinstance(neutral, bool) or isinstance(value, bool):
        return value is neutral
    return isinstance(value, int | float) and value == neutral


class _SamplingFields(_Request):
    """Fields shared by chat and text completions."""

    model: str
    temperature: float | None = None  # None: 1.0, as in the OpenAI API
    top_p: float | None = None
    max_tokens: int | None = None
    stop: str | list[str] | None = Field(default=None)
    # The range torch.Generator.manual_seed accepts (a larger seed would fail in the engine).
    seed: int | None = Field(default=None, ge=-(2**63), le=2**64 - 1)
    n: int | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: str | None = None
    # Non-standard: narrows prefix-cache reuse to requests with the same salt.
    cache_salt: str | None = None
    # Non-standard (as in vLLM): keep generating past the end-of-sequence token.
    ignore_eos: bool = False
    # Forwarded to an HTTP upstream as the client sent them; the built-in engine does
    # not implement them and refuses a request that sets one (unsupported_field()).
    # Types are loose on purpose: the upstream that implements them validates them.
    tools: list[Any] | None = None
    tool_choice: Any = None
    functions: list[Any] | None = None
    function_call: Any = None
    logprobs: bool | int | None = None  # chat: a bool; completions: an int
    top_logprobs: int | None = None
    response_format: dict[str, Any] | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    logit_bias: dict[str, Any] | None = None
    modalities: list[Any] | None = None
    audio: dict[str, Any] | None = None
    # vLLM's and SGLang's sampling extensions, loose for the same reason. The built-in
    # engine implements top_k and stop_token_ids (protocol/sampling.py) and refuses the
    # others unless neutral (_NEUTRAL): they were dropped unread, and top_k 1 sampled as
    # if absent (a review, session 45).
    top_k: Any = None
    stop_token_ids: Any = None
    min_p: Any = None
    repetition_penalty: Any = None
    min_tokens: Any = None
    use_beam_search: Any = None

    _null_stream = field_validator("stream", mode="before")(_null_is_false)
    _whole_counts = field_validator("max_tokens", "seed", "n", "top_logprobs", mode="before")(
        _whole_float_is_int
    )

    @field_validator("stop")
    @classmethod
    def _bounded_stops(cls, v: str | list[str] | None) -> str | list[str] | None:
        # A bound on what a body may ask, not the OpenAI API's 4: vLLM and SGLang take
        # any number, and the gateway forwards them. The built-in engine's own limits
        # (4 strings of at most 256 characters: its per-step stop check) are enforced
        # where its sampling parameters are built (protocol/sampling.py), a 400 there.
        if isinstance(v, list) and len(v) > MAX_REQUEST_STOPS:
            raise ValueError(f"at most {MAX_REQUEST_STOPS} stop sequences are allowed")
        stops = [v] if isinstance(v, str) else (v or [])
        if any(len(s) > MAX_REQUEST_STOP_CHARS for s in stops):
            raise ValueError(f"a stop sequence may be at most {MAX_REQUEST_STOP_CHARS} characters")
        return v

    def stop_tuple(self) -> tuple[str, ...]:
        if self.stop is None:
            return ()
        return (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)

    def unsupported_field(self) -> str | None:
        """The first field set to something the built-in engine does not implement.

        Ignoring such a field would answer a different question than the one asked
        (no tool call, no logprobs, no JSON mode), so the engine refuses it instead.
        """
        if self.n is not None and self.n > 1:
            return "n"
        for name in ("tools", "functions", "logit_bias", "modalities", "audio"):
            if getattr(self, name):
                return name
        for name in ("tool_choice", "function_call"):
            if getattr(self, name) not in (None, "none"):
                return name
        # `is not`: 0 == False, and a completion's `logprobs: 0` asks for the sampled
        # tokens' log probabilities all the same.
        if self.logprobs is not None and self.logprobs is not False:
            return "logprobs"
        if self.top_logprobs:
            return "top_logprobs"
        if self.response_format is not None and self.response_format.get("type") != "text":
            return "response_format"
        for name in ("presence_penalty", "frequency_penalty"):
            if getattr(self, name):
                return name
        for name, neutral in _NEUTRAL.items():
            value = getattr(self, name)
            if value is not None and not _is_neutral(value, neutral):
                return name
        return None

    @property
    def include_usage(self) -> bool:
        return bool(self.stream and self.stream_options and self.stream_options.include_usage)

    def requested_max_tokens(self) -> int | None:
        return self.max_tokens


#: More turns than any chat template or context window makes use of; a bound, so a
#: body of a million tiny messages is a 400 before any work (issue 14).
MAX_MESSAGES = 2048


class ChatCompletionRequest(_SamplingFields):
    messages: list[ChatMessage] = Field(min_length=1, max_length=MAX_MESSAGES)
    max_completion_tokens: int | None = None

    _whole_max = field_validator("max_completion_tokens", mode="before")(_whole_float_is_int)

    def requested_max_tokens(self) -> int | None:
        if self.max_completion_tokens is not None:
            return self.max_completion_tokens
        return self.max_tokens

    def prompt_messages(self) -> list[dict[str, str]]:
        """Messages for the chat template ("developer" is the newer name of "system")."""
        return [
            {"role": "system" if m.role == "developer" else m.role, "content": m.text()}
            for m in self.messages
        ]


class CompletionRequest(_SamplingFields):
    # A string, token ids, a list of strings or a list of token-id lists. Batches (more
    # than one prompt) are forwarded to an HTTP upstream uncached; the built-in engine
    # serves one prompt a request and refuses them (``unsupported_field``).
    prompt: str | list[int] | list[str] | list[list[int]]
    # Forwarded to an HTTP upstream as sent (loose types: the upstream validates them);
    # the built-in engine implements none of them and refuses a request that sets one.
    echo: Any = None
    suffix: Any = None
    best_of: Any = None

    def unsupported_field(self) -> str | None:
        name = super().unsupported_field()
        if name is not None:
            return name
        if self.echo is not None and self.echo is not False:
            return "echo"
        if self.suffix is not None and self.suffix != "":
            return "suffix"
        if self.best_of is not None and (isinstance(self.best_of, bool) or self.best_of != 1):
            return "best_of"
        if is_batch_prompt(self.prompt):
            return "prompt"
        return None

    def engine_prompt(self) -> str | list[int]:
        """The one prompt (the engine refused a batch first: ``unsupported_field``)."""
        prompt = self.prompt
        if isinstance(prompt, list) and prompt and isinstance(prompt[0], str | list):
            return prompt[0]
        return prompt  # type: ignore[return-value]


def is_batch_prompt(prompt: object) -> bool:
    """Whether a completion's ``prompt`` holds more than one prompt: several strings, or
    several token-id lists."""
    return isinstance(prompt, list) and len(prompt) > 1 and isinstance(prompt[0], str | list)


# ------------------------------------------------------------------ models


class ModelCard(_Response):
    id: str
    object: Literal["model"] = "model"
    created: int = Field(default_factory=lambda: int(time.time()))
    owned_by: str = "cachegate"
    max_model_len: int


class ModelList(_Response):
    object: Literal["list"] = "list"
    data: list[ModelCard]


# ------------------------------------------------------------------ parsing and helpers


def validation_error_message(exc: ValidationError) -> tuple[str, str | None]:
    """A one-line message and the offending top-level parameter of a request error."""
    errors = exc.errors(include_url=False)
    # Union members each report an error: the deepest one is the most specific.
    err = max(errors, key=lambda e: len(e["loc"]))
    loc = [str(p) for p in err["loc"]]
    param = loc[0] if loc else None
    # Union members add their type name to the location ("stop", "str"): drop those.
    path = ".".join(p for p in loc if not any(c in p for c in "[]") and p not in _TYPE_TAGS)
    msg = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "missing":
        return f"'{path}' is a required property", param
    return (f"invalid value for '{path}': {msg}" if path else msg), param


_TYPE_TAGS = {"str", "int", "float", "bool", "list", "dict", "none", "ContentPart"}


def parse_request(body: dict[str, Any], chat: bool) -> ChatCompletionRequest | CompletionRequest:
    """Validate a body (strict types, unknown fields ignored); n must be at least 1.

    Raises :class:`protocol.http.ApiError` (400) naming the offending parameter.
    Whether the server implements every field it sets (``n`` > 1, tools, …) is the
    server's question (:meth:`_SamplingFields.unsupported_field`), not the wire's.
    """
    schema = ChatCompletionRequest if chat else CompletionRequest
    try:
        req = schema.model_validate(body)
    except ValidationError as e:
        message, param = validation_error_message(e)
        raise ApiError(400, message, param=param) from None
    if req.n is not None and req.n < 1:
        raise ApiError(400, "n must be at least 1", param="n")
    return req


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"
