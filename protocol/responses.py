"""OpenAI response bodies and SSE chunks, built one way for every sender (torch-free).

The engine server answers with them, the gateway streams misses and replays
semantic hits with them, so a client sees the same shapes whichever layer answered.
"""

from __future__ import annotations

import re
import time
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


def answer_text(kind: Kind, stored: dict[str, Any]) -> tuple[str, str]:
    """(text, finish_reason) of a stored response body."""
    choice = (stored.get("choices") or [{}])[0]
    if kind == "chat":
        text = (choice.get("message") or {}).get("content") or ""
    else:
        text = choice.get("text") or ""
    return str(text), str(choice.get("finish_reason") or "stop")


#: Message fields besides ``content`` that a stored answer replays (reasoning models).
REPLAYED_FIELDS = ("reasoning_content",)


def answer_extras(kind: Kind, stored: dict[str, Any]) -> dict[str, str]:
    """The replayable message fields of a stored chat response besides its content."""
    if kind != "chat":
        return {}
    message = ((stored.get("choices") or [{}])[0] or {}).get("message") or {}
    return {k: message[k] for k in REPLAYED_FIELDS if isinstance(message.get(k), str)}


class ChunkWriter:
    """SSE events for one streamed response, in the OpenAI chunk format."""

    def __init__(self, kind: Kind, request_id: str, model: str, include_usage: bool) -> None:
        self.kind = kind
        self.request_id = request_id
        self.model = model
        self.include_usage = include_usage
        self.created = int(time.time())

    def _chunk(self, choices: list[dict[str, Any]]) -> dict[str, Any]:
        obj = "chat.completion.chunk" if self.kind == "chat" else "text_completion"
        body: dict[str, Any] = {
            "id": self.request_id,
            "object": obj,
            "created": self.created,
            "model": self.model,
            "choices": choices,
        }
        if self.include_usage:
            body["usage"] = None
        return body

    def start(self) -> str | None:
        if self.kind != "chat":
            return None
        return sse(
            self._chunk(
                [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]
            )
        )

    def delta(self, text: str, field: str = "content") -> str:
        if self.kind == "chat":
            choice = {"index": 0, "delta": {field: text}, "finish_reason": None}
        else:
            choice = {"index": 0, "text": text, "finish_reason": None}
        return sse(self._chunk([choice]))

    def finish(self, finish_reason: str, use: dict[str, Any]) -> list[str]:
        if self.kind == "chat":
            choice: dict[str, Any] = {"index": 0, "delta": {}, "finish_reason": finish_reason}
        else:
            choice = {"index": 0, "text": "", "finish_reason": finish_reason}
        events = [sse(self._chunk([choice]))]
        if self.include_usage:
            events.append(sse(self._chunk([]) | {"usage": use}))
        events.append("data: [DONE]\n\n")
        return events

    def error(self, body: dict[str, Any]) -> list[str]:
        return [sse(body), "data: [DONE]\n\n"]


_PIECES = re.compile(r"\S+\s*|\s+")


def replay_pieces(text: str, words_per_event: int = 4) -> list[str]:
    """A cached answer cut into small deltas, so a client renders it as a stream."""
    words = _PIECES.findall(text)
    return ["".join(words[i : i + words_per_event]) for i in range(0, len(words), words_per_event)]
