"""Which model responses may be cached.

Only complete, successful, non-empty answers are stored: every choice must have
finished with ``finish_reason == "stop"`` and carry text. A truncated answer
(``length``) would be served truncated forever; a refusal (``content_filter``
or a ``refusal`` message) or an error says nothing about the next request;
tool-call turns (``tool_calls``) depend on tool results the cache cannot see.
Answers the cache cannot replay as they were given are not stored either: one
carrying tool calls, log probabilities or audio (a replay would drop them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from semantic.results import (
    SKIP_EMPTY,
    SKIP_ERROR,
    SKIP_FINISH_PREFIX,
    SKIP_REFUSED,
    SKIP_TRUNCATED,
)


def _choice_text(choice: Mapping[str, Any], endpoint: str) -> Any:
    if endpoint == "completion":
        return choice.get("text")
    message = choice.get("message")
    return message.get("content") if isinstance(message, Mapping) else None


def uncacheable_reason(response: Any, endpoint: str = "chat") -> str | None:
    """``None`` when ``response`` (an OpenAI response body) may be cached, else why not."""
    if not isinstance(response, Mapping) or response.get("error"):
        return SKIP_ERROR
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices:
        return SKIP_EMPTY
    for choice in choices:
        if not isinstance(choice, Mapping):
            return SKIP_ERROR
        finish = choice.get("finish_reason")
        message = choice.get("message")
        if finish == "length":
            return SKIP_TRUNCATED
        if finish == "content_filter" or (isinstance(message, Mapping) and message.get("refusal")):
            return SKIP_REFUSED
        if finish != "stop":
            return f"{SKIP_FINISH_PREFIX}:{finish}"
        unreplayable = _unreplayable(choice, message)
        if unreplayable is not None:
            return unreplayable
        text = _choice_text(choice, endpoint)
        if not isinstance(text, str) or not text.strip():
            return SKIP_EMPTY
    return None


def _unreplayable(choice: Mapping[str, Any], message: Any) -> str | None:
    """What a replay of this choice would lose: tool calls, logprobs, token ids or audio."""
    if choice.get("logprobs"):
        return "logprobs"
    if choice.get("token_ids"):  # vLLM's return_token_ids: the answer's own ids
        return "token_ids"
    if isinstance(message, Mapping):
        if message.get("tool_calls") or message.get("function_call"):
            return "tool_calls"
        if message.get("audio"):
            return "audio"
    return None
