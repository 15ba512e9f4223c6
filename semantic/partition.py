"""The semantic partition: which earlier answers a question may be compared with.

The partition key (DESIGN.md, "Semantic partition") is the SHA-256 of a
canonical typed serialization (:mod:`semantic.canonical`) of:

1. a format tag and version,
2. the tenant's semantic namespace (set server-side from the tenant's policy;
   defaults to the tenant id; a policy that wants per-user isolation sets it to
   ``tenant/user`` — the client-chosen ``user`` field is *not* used),
3. the model id (the gateway passes the resolved model identity, so a model
   upgrade starts an empty partition),
4. the embedder id (vectors of two embedders are never compared),
5. the endpoint kind (``chat`` or ``completion``: the bodies differ),
6. a fingerprint of every request parameter that can change the answer,
7. the conversation context: every message except the last user message
   (system prompt, few-shot examples, earlier turns; roles and content), and the
   last user message's fields other than its role and content (``name``), when it
   has any (:data:`QUESTION_FIELDS`).

Only the last user message is embedded. The partition is a *hard filter*: a
lookup searches one partition's index and nothing else. Prefixing the embedded
text with a tenant name does not isolate (``"tenant A: q"`` and
``"tenant B: q"`` embed at cosine 0.95 with all-MiniLM-L6-v2).

Parameters (top-level request fields):

* :data:`ANSWER_PARAMS` are known to change the answer and are included.
* :data:`IGNORED_PARAMS` are known not to change the answer (transport,
  bookkeeping) and are excluded.
* ``model``, ``messages`` and ``prompt`` are handled separately (above).
* Any other field is **included** (fail closed): an unknown extension such as a
  guided-decoding schema or chat-template switch can change the answer, and
  including it only narrows the partition (fewer hits, never a wrong one).

A parameter whose value is ``null`` counts as absent, as it does for the API.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from semantic.canonical import canonical_bytes
from semantic.errors import InvalidQuestionError, InvalidRequestError
from semantic.question import coerce_question

PARTITION_FORMAT = ("cachegate.semantic.partition", 1)

Message = Mapping[str, Any]
Endpoint = Literal["chat", "completion"]

#: Fields that change the answer; included in the fingerprint.
ANSWER_PARAMS: frozenset[str] = frozenset(
    {
        # sampling
        "temperature", "top_p", "top_k", "min_p", "typical_p", "seed", "n", "best_of",
        "presence_penalty", "frequency_penalty", "repetition_penalty", "logit_bias",
        # length and stopping
        "max_tokens", "max_completion_tokens", "min_tokens", "stop", "stop_token_ids",
        "ignore_eos", "include_stop_str_in_output",
        # output shape
        "logprobs", "top_logprobs", "response_format", "modalities", "audio", "prediction",
        "reasoning_effort", "verbosity", "echo", "suffix", "skip_special_tokens",
        # tools
        "tools", "tool_choice", "parallel_tool_calls", "functions", "function_call",
        "web_search_options",
        # template / decoding extensions (vLLM, SGLang style)
        "chat_template", "chat_template_kwargs", "add_generation_prompt",
        "continue_final_message", "documents", "guided_json", "guided_regex",
        "guided_choice", "guided_grammar", "structured_outputs",
        # a client cache salt may only narrow
        "cache_salt",
    }
)  # fmt: skip

#: Fields that cannot change the answer; excluded from the fingerprint.
IGNORED_PARAMS: frozenset[str] = frozenset(
    {
        "user",  # client-chosen end-user tag for abuse tracking; see namespace above
        "stream", "stream_options",  # a cached body is re-streamed by the gateway
        "store", "metadata", "service_tier", "safety_identifier", "prompt_cache_key",
        "request_id", "priority",
    }
)  # fmt: skip

_STRUCTURAL = frozenset({"model", "messages", "prompt"})

#: The params entry holding the question message's fields other than role and content.
QUESTION_FIELDS = "question_message_fields"


def answer_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """The part of ``params`` that goes into the fingerprint (see module docstring)."""
    return {
        name: value
        for name, value in params.items()
        if value is not None and name not in IGNORED_PARAMS and name not in _STRUCTURAL
    }


#: Content part types named in a refusal's message; any other ``type`` is client text,
#: and error messages never quote it.
_KNOWN_PARTS = frozenset(
    {"image_url", "input_image", "input_audio", "file", "refusal", "input_text", "output_text"}
)


def message_text(content: Any) -> str:
    """Text of a message ``content``: a str, or a list of ``{"type": "text"}`` parts.

    A text part whose ``text`` is not a str (``null``, a number, an object) is refused
    like a non-text part: the question cannot be keyed, so the request skips the cache
    (and still reaches the model, which answers it or refuses it itself).
    """
    if isinstance(content, str):
        return content
    if isinstance(content, list) and content:
        texts: list[str] = []
        for part in content:
            if not isinstance(part, Mapping) or part.get("type") != "text":
                kind = part.get("type") if isinstance(part, Mapping) else type(part).__name__
                known = isinstance(kind, str) and kind in _KNOWN_PARTS
                shown = kind if known or not isinstance(part, Mapping) else "?"
                raise InvalidQuestionError(
                    f"question has a non-text part ({shown})", reason="not_text"
                )
            text = part.get("text", "")
            if not isinstance(text, str):
                raise InvalidQuestionError(
                    f"a text part's text must be a str, not {type(text).__name__}",
                    reason="not_text",
                )
            texts.append(text)
        return "\n".join(texts)
    raise InvalidQuestionError(
        f"question content must be text, not {type(content).__name__}", reason="not_text"
    )


def split_question(messages: Sequence[Message]) -> tuple[list[Message], str]:
    """Split a chat conversation into (context messages, question).

    The question is the last user message; the context is everything before it.
    A conversation with turns *after* the last user message (tool results, an
    assistant prefill) is not a standalone question and raises
    :class:`InvalidRequestError`, so the gateway bypasses the semantic layer.
    """
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
        raise InvalidRequestError("messages must be a list")
    for message in messages:
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise InvalidRequestError("every message must be an object with a role")
    last = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=None)
    if last is None:
        raise InvalidRequestError("no user message to take the question from")
    if last != len(messages) - 1:
        raise InvalidRequestError("messages follow the last user message (tool turn or prefill)")
    question = coerce_question(message_text(messages[last].get("content")))
    return list(messages[:last]), question


def question_from_prompt(prompt: Any) -> str:
    """The question of a completions request: a str prompt (or a one-element list of str)."""
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if not isinstance(prompt, str | bytes):
        raise InvalidRequestError("only a single text prompt can be looked up")
    return coerce_question(prompt)


def _clean_message(message: Message) -> dict[str, Any]:
    # Null fields mean absent (an SDK may send "tool_calls": null); everything else counts.
    return {k: v for k, v in message.items() if v is not None}


def partition_key(
    *,
    namespace: str,
    model: str,
    embedder_id: str,
    params: Mapping[str, Any] | None = None,
    context: Sequence[Message] = (),
    endpoint: Endpoint = "chat",
) -> str:
    """SHA-256 hex of the partition components (see module docstring)."""
    for label, value in (("namespace", namespace), ("model", model), ("embedder_id", embedder_id)):
        if not isinstance(value, str) or not value:
            raise InvalidRequestError(f"{label} must be a non-empty str")
    if endpoint not in ("chat", "completion"):
        raise InvalidRequestError(f"unknown endpoint {endpoint!r}")
    payload = (
        PARTITION_FORMAT,
        namespace,
        model,
        embedder_id,
        endpoint,
        answer_params(params or {}),
        [_clean_message(m) for m in context],
    )
    return hashlib.sha256(canonical_bytes(payload)).hexdigest()


@dataclass(frozen=True)
class SemanticQuery:
    """One question as the cache sees it: who asks, in which partition, what."""

    tenant: str
    model: str
    question: str
    context: tuple[Message, ...] = ()
    params: Mapping[str, Any] = field(default_factory=dict)
    namespace: str | None = None  # None: the tenant id
    endpoint: Endpoint = "chat"

    def __post_init__(self) -> None:
        if not isinstance(self.tenant, str) or not self.tenant:
            raise InvalidRequestError("tenant must be a non-empty str")
        object.__setattr__(self, "question", coerce_question(self.question))
        object.__setattr__(self, "context", tuple(self.context))

    @classmethod
    def from_chat(
        cls, *, tenant: str, body: Mapping[str, Any], namespace: str | None = None
    ) -> SemanticQuery:
        """From a ``/v1/chat/completions`` request body."""
        messages = body.get("messages") or []
        context, question = split_question(messages)
        if QUESTION_FIELDS in body:
            # The key's own slot for the question message's extra fields: a body field
            # of that name would key alike with a request whose message has those fields.
            raise InvalidRequestError(
                f"the body sets the reserved field {QUESTION_FIELDS}", reason="reserved_field"
            )
        params = answer_params(body)
        # The question's own message beyond its text (a ``name`` an upstream reads, say)
        # can change the answer too; absent for plain messages, so their keys stay.
        last = _clean_message(messages[-1])
        fields = {k: v for k, v in last.items() if k not in ("role", "content")}
        if fields:
            params[QUESTION_FIELDS] = fields
        return cls(
            tenant=tenant,
            model=_model(body),
            question=question,
            context=tuple(context),
            params=params,
            namespace=namespace,
            endpoint="chat",
        )

    @classmethod
    def from_completion(
        cls, *, tenant: str, body: Mapping[str, Any], namespace: str | None = None
    ) -> SemanticQuery:
        """From a ``/v1/completions`` request body."""
        return cls(
            tenant=tenant,
            model=_model(body),
            question=question_from_prompt(body.get("prompt")),
            params=answer_params(body),
            namespace=namespace,
            endpoint="completion",
        )

    def partition_key(self, embedder_id: str) -> str:
        return partition_key(
            namespace=self.namespace or self.tenant,
            model=self.model,
            embedder_id=embedder_id,
            params=self.params,
            context=self.context,
            endpoint=self.endpoint,
        )


def _model(body: Mapping[str, Any]) -> str:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise InvalidRequestError("request has no model")
    return model
