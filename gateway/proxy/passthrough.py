"""A streamed upstream answer, put back together for the semantic layer.

The client gets every chunk as the upstream sent it; the backfill needs the
answer as one response body to decide whether it may be stored
(``semantic/cacheability.py``) and to store it. So the body is rebuilt the way
an OpenAI client SDK accumulates a stream: per choice, the text fields are
concatenated, and anything a text replay could not reproduce (tool calls,
logprobs, audio, a refusal) is kept, so the cacheability rules see it and refuse
the answer instead of caching half of it.

The chunks are the upstream's, forwarded as they came (``gateway/proxy/relay.py``):
a field this reads that has the wrong type (``choices`` not a list, a choice or a
``delta`` not an object, a text, ``index`` or ``finish_reason`` of another type)
is skipped here, never a crash, and the body is then marked as an error
(``UNREADABLE``), which the cacheability rules refuse to store: what the client got
is not what the body would say.

Fields this does not know are kept as an SDK keeps them (since session 50: they were
dropped, so a hit replayed a streamed miss's answer without them and a body's with
them): a choice's (SGLang's ``matched_stop``) as its last value that was not null, a
delta's string (another server's text) concatenated, one only ever null or empty
(OpenRouter's ``reasoning_details: []`` on every chunk) as it came; a number is a
token's (Together's ``token_id``), no part of the answer. A delta field holding a list
or an object that is not empty (OpenRouter's ``reasoning_details`` fragments, which
its body merges) cannot be put back together as the body would have it, so such an
answer is not stored (``UNREBUILT``): a hit replays all of an answer or none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from protocol.responses import Kind

# `reasoning`: vLLM's name since late 2025 (it was `reasoning_content`, still others')
_TEXT_FIELDS = ("content", "reasoning_content", "reasoning", "refusal")
# What the body carries when a chunk could not be read whole: an answer that is an
# error to the semantic layer (``uncacheable_reason``), so it is never stored.
UNREADABLE = {
    "message": "the upstream sent a chunk the gateway could not read whole",
    "type": "upstream_error",
    "param": None,
    "code": None,
}
# A stream with a delta field that cannot be put back together: not stored either.
UNREBUILT = {
    "message": "the upstream's stream carried a field the gateway cannot put back together",
    "type": "upstream_error",
    "param": None,
    "code": None,
}
# A choice's fields read below; any other is kept (``_Choice.extra``).
_CHOICE_FIELDS = frozenset({"index", "finish_reason", "stop_reason", "logprobs", "delta", "text"})
# A delta's fields read below (``role``: a message's is always the assistant's).
_DELTA_FIELDS = frozenset(
    {*_TEXT_FIELDS, "role", "tool_calls", "function_call", "audio", "annotations"}
)


@dataclass
class _Choice:
    text: dict[str, list[str]] = field(default_factory=dict)
    tool_calls: list[Any] = field(default_factory=list)
    function_call: Any = None
    logprobs: list[Any] = field(default_factory=list)
    audio: Any = None
    annotations: list[Any] = field(default_factory=list)  # url citations, in deltas of their own
    finish_reason: str | None = None
    #: vLLM's ``stop_reason`` (null, or the stop string or token id that ended the
    #: answer), as its chunks named it; absent when no chunk had one.
    stop_reason: dict[str, Any] = field(default_factory=dict)
    #: Choice fields of other servers', each as its last chunk that was not null said.
    extra: dict[str, Any] = field(default_factory=dict)
    #: Delta fields of other servers' that only ever came null or empty, as they came.
    empty: dict[str, Any] = field(default_factory=dict)


class StreamAssembly:
    """Accumulates raw chunks (:meth:`add`) into a non-streamed body (:meth:`body`)."""

    def __init__(self, kind: Kind) -> None:
        self.kind = kind
        self.head: dict[str, Any] = {}
        self.usage: dict[str, Any] | None = None  # the upstream's own usage chunk
        self.choices: dict[int, _Choice] = {}
        self.unreadable = False  # a chunk had a field of the wrong type: never stored
        self.unrebuilt = False  # a delta field that cannot be put back: never stored

    def add(self, chunk: dict[str, Any]) -> None:
        # Named, not every key: a chunk can carry per-chunk noise (OpenAI's random
        # ``obfuscation`` padding) that is no part of the answer.
        for key in ("id", "created", "model", "system_fingerprint", "service_tier"):
            if key in chunk and key not in self.head:
                self.head[key] = chunk[key]
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            self.unreadable |= choices is not None
            return
        for raw in choices:
            if isinstance(raw, dict):
                self._add_choice(raw)
            else:
                self.unreadable = True

    def _add_choice(self, raw: dict[str, Any]) -> None:
        index = raw.get("index", 0)
        finish = raw.get("finish_reason")
        if not _is_index(index) or not isinstance(finish, str | None):
            self.unreadable = True
            return
        c = self.choices.setdefault(index, _Choice())
        c.finish_reason = finish or c.finish_reason
        # Kept so a hit ends as the upstream's stream did (a review, session 47: a hit
        # after a streamed miss had no `stop_reason`, one after a body had it). vLLM
        # names it null on every chunk and sets it on the finishing one: a later null
        # never undoes a set one. Another type is left out, never stored.
        stop = raw.get("stop_reason")
        if (
            "stop_reason" in raw
            and _is_stop_reason(stop)
            and (stop is not None or not c.stop_reason)
        ):
            c.stop_reason = {"stop_reason": stop}
        if raw.get("logprobs"):
            c.logprobs.append(raw["logprobs"])
        for name in raw.keys() - _CHOICE_FIELDS:
            if raw[name] is not None or name not in c.extra:
                c.extra[name] = raw[name]
        if self.kind == "completion":
            self._add_text(c, "text", raw.get("text"))
            return
        delta = raw.get("delta")
        if not isinstance(delta, dict):
            self.unreadable |= delta is not None
            return
        for name in _TEXT_FIELDS:
            self._add_text(c, name, delta.get(name))
        tool_calls = delta.get("tool_calls")
        if isinstance(tool_calls, list):
            c.tool_calls.extend(tool_calls)
        elif tool_calls:  # not a list: kept whole, enough to refuse the store
            c.tool_calls.append(tool_calls)
        c.function_call = delta.get("function_call") or c.function_call
        c.audio = delta.get("audio") or c.audio
        annotations = delta.get("annotations")
        if isinstance(annotations, list):
            c.annotations.extend(annotations)
        elif annotations is not None:
            self.unreadable = True
        for name in delta.keys() - _DELTA_FIELDS:
            value = delta[name]
            if isinstance(value, str):
                c.text.setdefault(name, []).append(value)
            elif value is None or value == [] or value == {}:
                # named empty (OpenRouter's `reasoning_details: []` on every chunk): empty
                # in the message too, unless a chunk gave it text
                c.empty.setdefault(name, value)
            elif isinstance(value, int | float):
                pass  # per token (Together's `token_id`): no part of a whole answer
            else:
                self.unrebuilt = True

    def _add_text(self, c: _Choice, name: str, value: Any) -> None:
        if isinstance(value, str):
            c.text.setdefault(name, []).append(value)
        elif value is not None:
            self.unreadable = True

    def body(self, usage: dict[str, Any]) -> dict[str, Any]:
        """The answer as a body; ``usage`` holds the counts the gateway read, and the
        upstream's own usage adds what else it said (``completion_tokens_details``, the
        other ``prompt_tokens_details``), so a hit replays them as after a body."""
        choices = [self._choice(i, c) for i, c in sorted(self.choices.items())]
        obj = "chat.completion" if self.kind == "chat" else "text_completion"
        if self.usage is not None:
            said, details = self.usage, self.usage.get("prompt_tokens_details")
            usage = {k: v for k, v in said.items() if k not in usage} | usage
            if isinstance(details, dict) and isinstance(usage.get("prompt_tokens_details"), dict):
                usage["prompt_tokens_details"] = details | usage["prompt_tokens_details"]
        body = self.head | {"object": obj, "choices": choices, "usage": usage}
        if self.unreadable:
            return body | {"error": dict(UNREADABLE)}
        return body | {"error": dict(UNREBUILT)} if self.unrebuilt else body

    def _choice(self, index: int, c: _Choice) -> dict[str, Any]:
        joined = c.empty | {name: "".join(parts) for name, parts in c.text.items()}
        out: dict[str, Any] = (
            c.extra
            | {
                "index": index,
                "finish_reason": c.finish_reason,
                "logprobs": c.logprobs or None,
            }
            | c.stop_reason
        )
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
        if c.annotations:
            message["annotations"] = c.annotations
        return out | {"message": message}


def _is_stop_reason(value: Any) -> bool:
    """A value vLLM gives ``stop_reason``: null, a stop string or a token id."""
    return value is None or isinstance(value, str) or _is_index(value)


def _is_index(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
