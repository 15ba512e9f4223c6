"""OpenAI response bodies and SSE chunks, built one way for every sender (torch-free).

The engine server answers with them, the gateway streams misses and replays
semantic hits with them, so a client sees the same shapes whichever layer answered.
A hit replays its stored answer as the upstream gave it (``replayed_body``,
``answer_shape``): the upstream's model, ``system_fingerprint``, message and usage
details; only the id, ``created`` and the cached-token accounting are the hit's own.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any, Literal

from protocol.http import sse

Kind = Literal["chat", "completion"]


def usage(prompt: int, completion: int, cached: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    }


def response_body(
    kind: Kind,
    request_id: str,
    model: str,
    text: str,
    finish_reason: str,
    use: dict[str, Any],
    message_extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``message_extra``: more fields of a chat message (a replayed ``reasoning_content``)."""
    created = int(time.time())
    if kind == "chat":
        return {
            "id": request_id,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text} | (message_extra or {}),
                    "finish_reason": finish_reason,
                    "logprobs": None,
                }
            ],
            "usage": use,
        }
    return {
        "id": request_id,
        "object": "text_completion",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "text": text, "finish_reason": finish_reason, "logprobs": None}],
        "usage": use,
    }


def _first_choice(stored: Any) -> dict[str, Any]:
    choices = stored.get("choices") if isinstance(stored, dict) else None
    first = choices[0] if isinstance(choices, list) and choices else None
    return first if isinstance(first, dict) else {}


def _message(choice: dict[str, Any]) -> dict[str, Any]:
    message = choice.get("message")
    return message if isinstance(message, dict) else {}


def answer_text(kind: Kind, stored: dict[str, Any]) -> tuple[str, str]:
    """(text, finish_reason) of a stored response body."""
    choice = _first_choice(stored)
    holder, name = (_message(choice), "content") if kind == "chat" else (choice, "text")
    return str(holder.get(name) or ""), str(choice.get("finish_reason") or "stop")


#: Message fields besides ``content`` that a stored answer replays as stream deltas
#: (reasoning models: vLLM's ``reasoning``, formerly ``reasoning_content``).
REPLAYED_FIELDS = ("reasoning_content", "reasoning")
#: Message list fields a stream replay sends whole, in one delta after the text (as
#: OpenAI streams a search model's ``annotations``).
REPLAYED_LISTS = ("annotations",)


def answer_extras(kind: Kind, stored: dict[str, Any]) -> dict[str, str]:
    """The message fields of a stored chat response a stream replays as deltas."""
    if kind != "chat":
        return {}
    message = _message(_first_choice(stored))
    return {k: message[k] for k in REPLAYED_FIELDS if isinstance(message.get(k), str)}


def answer_lists(kind: Kind, stored: dict[str, Any]) -> dict[str, list[Any]]:
    """The non-empty list fields of a stored chat message a stream replays whole."""
    if kind != "chat":
        return {}
    message = _message(_first_choice(stored))
    return {
        k: message[k] for k in REPLAYED_LISTS if isinstance(message.get(k), list) and message[k]
    }


#: Fields that describe the request which produced a stored answer rather than the answer
#: (the prompt's own tokens or logprobs, vLLM's disaggregated-prefill handles): another
#: question's hit replays them only when they are null.
REQUEST_BOUND = frozenset({"prompt_logprobs", "prompt_token_ids", "kv_transfer_params"})
#: Message fields a text replay cannot reproduce. The cache refuses answers that carry
#: them (``semantic/cacheability.py``); an empty one (vLLM's ``"tool_calls": []``, a
#: ``"refusal": null``) is replayed as it was, a set one an older store kept is not.
UNREPLAYABLE = frozenset({"tool_calls", "function_call", "audio", "refusal"})
#: Top-level fields an OpenAI stream repeats on every chunk.
CHUNK_FIELDS = ("system_fingerprint", "service_tier")

_BUILT_TOP = frozenset({"id", "object", "created", "model", "choices", "usage"})
_BUILT_CHOICE = frozenset({"index", "message", "text", "delta", "finish_reason", "logprobs"})


@dataclass(frozen=True)
class AnswerShape:
    """What a replay of a stored answer keeps besides its text, finish reason and usage:
    everything the upstream returned that a hit has no reason to change."""

    model: str | None  # the model the upstream answered with (None: not a usable string)
    top: dict[str, Any]  # other top-level fields (system_fingerprint, service_tier, ...)
    choice: dict[str, Any]  # other fields of the choice (vLLM's stop_reason, ...)
    message: dict[str, Any]  # message fields besides role and content (refusal, annotations)

    def chunk_fields(self) -> dict[str, Any]:
        return {k: self.top[k] for k in CHUNK_FIELDS if k in self.top}


def _replayable(fields: dict[str, Any], built: frozenset[str]) -> dict[str, Any]:
    return {
        k: v
        for k, v in fields.items()
        if isinstance(k, str) and k not in built and not (k in REQUEST_BOUND and v is not None)
    }


def answer_shape(kind: Kind, stored: dict[str, Any]) -> AnswerShape:
    """The stored answer's fields a hit replays as the upstream gave them. A value that is
    not the shape OpenAI gives (a stored answer from an older version or an odd upstream)
    is left out, and the hit is built as it would be without it."""
    stored = stored if isinstance(stored, dict) else {}
    model = stored.get("model")
    choice = _first_choice(stored)
    message: dict[str, Any] = {}
    if kind == "chat":
        message = {
            k: v
            for k, v in _replayable(_message(choice), frozenset({"role", "content"})).items()
            if not (k in UNREPLAYABLE and v)
        }
    return AnswerShape(
        model=model if isinstance(model, str) and model else None,
        top=_replayable(stored, _BUILT_TOP),
        choice=_replayable(choice, _BUILT_CHOICE),
        message=message,
    )


def replayed_usage(stored: Any, prompt: int, completion: int) -> dict[str, Any]:
    """A hit's usage: every prompt token counted as cached (``usage``), with the detail
    fields the stored usage had (``completion_tokens_details``, the other
    ``prompt_tokens_details``) kept. A stored usage that is not an object gives the
    plain one."""
    use = usage(prompt, completion, prompt)
    if not isinstance(stored, dict):
        return use
    details = stored.get("prompt_tokens_details")
    replayed = {k: v for k, v in stored.items() if isinstance(k, str)} | use
    if isinstance(details, dict):
        replayed["prompt_tokens_details"] = details | use["prompt_tokens_details"]
    # DeepSeek's own names for the same accounting
    if "prompt_cache_hit_tokens" in stored:
        replayed["prompt_cache_hit_tokens"] = prompt
    if "prompt_cache_miss_tokens" in stored:
        replayed["prompt_cache_miss_tokens"] = 0
    return replayed


def replayed_body(
    kind: Kind,
    request_id: str,
    model: str,
    stored: dict[str, Any],
    use: dict[str, Any],
) -> dict[str, Any]:
    """A non-streamed hit: the stored answer with a new id and ``created`` and ``use`` as
    its usage; ``model`` when the stored one is not a usable string."""
    text, finish_reason = answer_text(kind, stored)
    shape = answer_shape(kind, stored)
    body = response_body(
        kind, request_id, shape.model or model, text, finish_reason, use, shape.message
    )
    choice = body["choices"][0] | shape.choice
    stored_choice = _first_choice(stored)
    if "message" in choice:
        choice["message"] = _in_order(_message(stored_choice), choice["message"])
    body["choices"] = [_in_order(stored_choice, choice)]
    return _in_order(stored, body | shape.top)


def _in_order(stored: Any, built: dict[str, Any]) -> dict[str, Any]:
    """``built`` with its keys in the order the stored answer had them (then the rest)."""
    keys = stored if isinstance(stored, dict) else {}
    return {k: built[k] for k in keys if k in built} | built


class ChunkWriter:
    """SSE events for one streamed response, in the OpenAI chunk format."""

    def __init__(
        self,
        kind: Kind,
        request_id: str,
        model: str,
        include_usage: bool,
        extra: dict[str, Any] | None = None,
    ) -> None:
        """``extra``: top-level fields every chunk carries (a replayed ``system_fingerprint``)."""
        self.kind = kind
        self.request_id = request_id
        self.model = model
        self.include_usage = include_usage
        self.extra = extra or {}
        self.created = int(time.time())

    def _chunk(self, choices: list[dict[str, Any]]) -> dict[str, Any]:
        obj = "chat.completion.chunk" if self.kind == "chat" else "text_completion"
        body: dict[str, Any] = {
            "id": self.request_id,
            "object": obj,
            "created": self.created,
            "model": self.model,
        }
        body |= {k: v for k, v in self.extra.items() if k not in body}
        body["choices"] = choices
        if self.include_usage:
            body["usage"] = None
        return body

    def start(self) -> str | None:
        if self.kind != "chat":
            return None
        return sse(
            self._chunk(
                [
                    {
                        "index": 0,
                        "delta": {"role": "assistant", "content": ""},
                        "logprobs": None,
                        "finish_reason": None,
                    }
                ]
            )
        )

    def delta(self, text: Any, field: str = "content") -> str:
        """One delta: ``text`` of ``field`` (chat: any JSON value, an annotations list)."""
        if self.kind == "chat":
            choice = {"index": 0, "delta": {field: text}, "logprobs": None, "finish_reason": None}
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": None}
        return sse(self._chunk([choice]))

    def finish(
        self, finish_reason: str, use: dict[str, Any], choice_extra: dict[str, Any] | None = None
    ) -> list[str]:
        """The last events; ``choice_extra``: fields the finish chunk's choice carries
        besides the built ones (a replayed answer's ``stop_reason``, as vLLM ends with)."""
        if self.kind == "chat":
            choice: dict[str, Any] = {
                "index": 0,
                "delta": {},
                "logprobs": None,
                "finish_reason": finish_reason,
            }
        else:
            choice = {"index": 0, "text": "", "logprobs": None, "finish_reason": finish_reason}
        choice |= {k: v for k, v in (choice_extra or {}).items() if k not in choice}
        events = [sse(self._chunk([choice]))]
        if self.include_usage:
            events.append(sse(self._chunk([]) | {"usage": use}))
        events.append("data: [DONE]\n\n")
        return events

    def error(self, body: dict[str, Any]) -> list[str]:
        return [sse(body), "data: [DONE]\n\n"]


_PIECES = re.compile(r"\S+\s*|\s+")
#: A run without spaces longer than this is cut (Chinese or Japanese has no spaces: a
#: whole answer was one delta before session 44), into pieces of RUN_PIECE characters.
LONG_RUN = 16
RUN_PIECE = 6


def replay_pieces(text: str, words_per_event: int = 4) -> list[str]:
    """A cached answer cut into small deltas, so a client renders it as a stream: about
    ``words_per_event`` words each, or RUN_PIECE characters of text without spaces.
    Joined, they are ``text`` exactly."""
    words: list[str] = []
    for word in _PIECES.findall(text):
        if len(word) <= LONG_RUN:
            words.append(word)
        else:
            words += [word[i : i + RUN_PIECE] for i in range(0, len(word), RUN_PIECE)]
    return ["".join(words[i : i + words_per_event]) for i in range(0, len(words), words_per_event)]
