"""A streamed upstream answer, put back together for the semantic layer.

The client gets every chunk as the upstream sent it; the backfill needs the
answer as one response body to decide whether it may be stored
(``semantic/cacheability.py``) and to store it. So the body is rebuilt the way
an OpenAI client SDK accumulates a stream: per choice, the text fields are
concatenated, and anything a text replay could not reproduce (tool calls,
logprobs, audio, a refusal) is kept, so the cacheability rules see it and refuse
the answer instead of caching half of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from protocol.responses import Kind

_TEXT_FIELDS = ("content", "reasoning_content", "refusal")


@dataclass
class _Choice:
    text: dict[str, list[str]] = field(default_factory=dict)
    tool_calls: list[Any] = field(default_factory=list)
    function_call: Any = None
    logprobs: list[Any] = field(default_factory=list)
    audio: Any = None
    finish_reason: str | None = None


class StreamAssembly:
    """Accumulates raw chunks (:meth:`add`) into a non-streamed body (:meth:`body`)."""

    def __init__(self, kind: Kind) -> None:
        self.kind = kind
        self.head: dict[str, Any] = {}
        self.choices: dict[int, _Choice] = {}

    def add(self, chunk: dict[str, Any]) -> None:
        for key in ("id", "created", "model", "system_fingerprint"):
            if key in chunk and key not in self.head:
                self.head[key] = chunk[key]
        for raw in chunk.get("choices") or []:
            if not isinstance(raw, dict):
                continue
            index = raw.get("index", 0)
            c = self.choices.setdefault(index if isinstance(index, int) else 0, _Choice())
            c.finish_reason = raw.get("finish_reason") or c.finish_reason
            if raw.get("logprobs"):
                c.logprobs.append(raw["logprobs"])
            if self.kind == "completion":
                if isinstance(raw.get("text"), str):
                    c.text.setdefault("text", []).append(raw["text"])
                continue
            delta = raw.get("delta")
            if not isinstance(delta, dict):
                continue
            for name in _TEXT_FIELDS:
                if isinstance(delta.get(name), str):
                    c.text.setdefault(name, []).append(delta[name])
            if delta.get("tool_calls"):
                c.tool_calls.extend(delta["tool_calls"])
            c.function_call = delta.get("function_call") or c.function_call
            c.audio = delta.get("audio") or c.audio

    def body(self, usage: dict[str, Any]) -> dict[str, Any]:
        choices = [self._choice(i, c) for i, c in sorted(self.choices.items())]
        obj = "chat.completion" if self.kind == "chat" else "text_completion"
        return self.head | {"object": obj, "choices": choices, "usage": usage}

    def _choice(self, index: int, c: _Choice) -> dict[str, Any]:
        joined = {name: "".join(parts) for name, parts in c.text.items()}
        out: dict[str, Any] = {
            "index": index,
            "finish_reason": c.finish_reason,
            "logprobs": c.logprobs or None,
        }
        if self.kind == "completion":
            return out | {"text": joined.get("text", "")}
        message: dict[str, Any] = {"role": "assistant", "content": joined.get("content")}
        message |= {k: v for k, v in joined.items() if k != "content"}
        if c.tool_calls:
            message["tool_calls"] = c.tool_calls  # fragments: enough to refuse the store
        if c.function_call:
            message["function_call"] = c.function_call
        if c.audio:
            message["audio"] = c.audio
        return out | {"message": message}
