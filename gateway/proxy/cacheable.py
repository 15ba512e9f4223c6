"""Whether a cached text answer can stand in for a request's answer at all.

Asked before any lookup and again before any store: a request that asks for tool
calls, log probabilities, several choices, its prompt echoed, audio, or that shows
any content part that is not text (images, audio, video, files) cannot be
replayed from a stored text answer; nor can one sampled hotter than the tenant
allows (a bound its policy sets).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from protocol.openai import is_batch_prompt


def request_temperature(value: Any) -> float:
    """The request's temperature for the policy's bound: 1.0 when absent, as for the API.
    One that is no finite number (a huge integer overflows ``float``) counts as above
    any bound, so the request skips the cache instead of failing."""
    if value is None:
        return 1.0
    try:
        temperature = float(value)
    except (TypeError, ValueError, OverflowError):
        return math.inf
    return temperature if math.isfinite(temperature) else math.inf


#: The reason named for well-known media parts; any other part that is not text is
#: "media". Deny by default: the semantic key is the text alone, so an answer about a
#: video, a file or a part type not invented yet would be served for other media.
_MEDIA_PARTS = {
    "image_url": "images",
    "input_image": "images",
    "input_audio": "audio",
    "audio_url": "audio",
    "video_url": "video",
    "file": "files",
    "input_file": "files",
}


_TEXT_PARTS = frozenset({"text", "refusal"})


def _is_metadata(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())


#: The tiers the OpenAI API documents. Another string skips the cache: OpenAI refuses
#: it, and an upstream that knows a newer tier decides what it means (a skip costs a
#: hit, never an answer).
SERVICE_TIERS = frozenset({"auto", "default", "flex", "scale", "priority"})


def _is_whole_number(value: Any) -> bool:
    """vLLM's ``priority`` (an int; pydantic also takes 2.0, not 2.5 or true)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


#: Fields left out of the cache key (``semantic/partition.py`` IGNORED_PARAMS) that the
#: OpenAI API (or vLLM) still checks, each with the check for the values it accepts
#: (besides null): ``service_tier`` one of its tiers, ``store`` a boolean, ``metadata``
#: an object of strings, ``safety_identifier`` and ``prompt_cache_key`` strings
#: (OpenAI), ``request_id`` a string and ``priority`` a whole number (vLLM; since
#: session 50: a hit had answered 200 where they answer 400).
_TYPED_IGNORED: dict[str, Callable[[Any], bool]] = {
    "service_tier": lambda v: isinstance(v, str) and v in SERVICE_TIERS,
    "store": lambda v: isinstance(v, bool),
    "metadata": _is_metadata,
    "safety_identifier": lambda v: isinstance(v, str),
    "prompt_cache_key": lambda v: isinstance(v, str),
    "request_id": lambda v: isinstance(v, str),
    "priority": _is_whole_number,
}


def mistyped_ignored_field(body: dict[str, Any]) -> str | None:
    """The name of a field the cache key ignores whose value the OpenAI API refuses
    (``"metadata": 5``, ``"store": "yes"``, ``"service_tier": 7`` or ``"gold"``,
    ``"priority": "high"``), if any.

    Such a request skips the lookup and the backfill: the key ignores the field, so a
    hit answered 200 where OpenAI answers 400 and another upstream may read the value
    its own way (a review, session 47). The upstream decides, as for any request the
    cache cannot read safely; the gateway does not refuse it itself, since an upstream
    that accepts it is not the gateway's to overrule. The reason is the field's name,
    never its value (user text)."""
    for name, accepts in _TYPED_IGNORED.items():
        value = body.get(name)
        if value is not None and not accepts(value):
            return name
    return None


def unreplayable_request(body: dict[str, Any]) -> str | None:
    """Why a cached text answer could not replay this request's answer faithfully:
    it asks for tool calls, log probabilities, several choices (or several prompts),
    its prompt echoed, audio,
    or any message holds a content part that is not text.
    Such requests skip the lookup, and their answers are not stored."""
    if body.get("tools") or body.get("functions"):
        return "tools"
    logprobs = body.get("logprobs")
    # `is not`: a completion's `logprobs: 0` (== False) asks for them all the same;
    # vLLM's `prompt_logprobs` (0 too) asks for the prompt's, which are its own
    if (logprobs is not None and logprobs is not False) or body.get("top_logprobs"):
        return "logprobs"
    prompt_logprobs = body.get("prompt_logprobs")
    if prompt_logprobs is not None and prompt_logprobs is not False:
        return "logprobs"
    # vLLM's token ids of the prompt and the answer: another question's are not these
    if body.get("return_token_ids") or body.get("return_tokens_as_token_ids"):
        return "token_ids"
    # vLLM's running usage on every chunk: a replay has no per-chunk token counts
    options = body.get("stream_options")
    if body.get("stream") and isinstance(options, dict) and options.get("continuous_usage_stats"):
        return "continuous_usage"
    # Options for a stream not asked for: vLLM and OpenAI refuse the request (a 400),
    # which a hit would have answered 200; the upstream decides every time.
    if body.get("stream") is not True and isinstance(options, dict) and options:
        return "stream_options"
    wrong = mistyped_ignored_field(body)
    if wrong is not None:
        return wrong
    if (body.get("n") or 1) != 1:
        return "n"
    if is_batch_prompt(body.get("prompt")):  # several answers, one per prompt
        return "batch"
    if body.get("echo"):  # a completion that repeats its prompt: a paraphrase's would not
        return "echo"
    if body.get("suffix"):  # a completion inserted before a suffix the key does not hold
        return "suffix"
    modalities = body.get("modalities")
    if body.get("audio") or (isinstance(modalities, list) and "audio" in modalities):
        return "audio"
    # Read whatever its shape: a completion's body is not validated as a chat's is, and
    # `"messages": 5` or a part whose type is a list was a TypeError there (a 500).
    messages = body.get("messages")
    for message in messages if isinstance(messages, list) else []:
        content = message.get("content") if isinstance(message, dict) else None
        for part in content if isinstance(content, list) else []:
            kind = part.get("type") if isinstance(part, dict) else None
            # In any turn: an earlier one's media shapes the answer too. An assistant's
            # "refusal" part is text like "text" is.
            if not isinstance(kind, str):
                return "media"
            if kind not in _TEXT_PARTS:
                return _MEDIA_PARTS.get(kind, "media")
    return None
