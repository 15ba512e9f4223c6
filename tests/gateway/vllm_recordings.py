"""Responses of a vLLM 0.x OpenAI server, written out as it sends them.

The shapes follow vLLM's ``vllm/entrypoints/openai/protocol.py`` (non-streamed
bodies carry ``reasoning_content``, ``tool_calls: []``, ``stop_reason``,
``prompt_logprobs``, ``kv_transfer_params``; stream chunks are dumped with
``exclude_unset``, so no ``usage`` key unless the final usage chunk; tool calls
from the hermes parser stream as a name delta, then argument fragments, and end
with ``finish_reason: "tool_calls"``) and the OpenAI chat format for logprobs
(``content[].top_logprobs[]`` with ``bytes``). ``tests/gateway/scripted_upstream.py``
plays them; the tests compare what a client gets through the gateway with them.
"""

from __future__ import annotations

import json
from typing import Any

MODEL = "Qwen/Qwen2.5-1.5B-Instruct"
REASONER = "Qwen/QwQ-32B"
CREATED = 1733040000
FINGERPRINT = "fp_vllm_0.9.2"

MODEL_LIST: dict[str, Any] = {
    "object": "list",
    "data": [
        {
            "id": name,
            "object": "model",
            "created": CREATED,
            "owned_by": "vllm",
            "root": name,
            "parent": None,
            "max_model_len": 32768,
            "permission": [
                {
                    "id": f"modelperm-{i}4d1f0c2b9a8e7d6c",
                    "object": "model_permission",
                    "created": CREATED,
                    "allow_create_engine": False,
                    "allow_sampling": True,
                    "allow_logprobs": True,
                    "allow_search_indices": False,
                    "allow_view": True,
                    "allow_fine_tuning": False,
                    "organization": "*",
                    "group": None,
                    "is_blocking": False,
                }
            ],
        }
        for i, name in enumerate((MODEL, REASONER))
    ],
}

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather in a city",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city"],
            },
        },
    }
]
TOOL_CALL_ID = "chatcmpl-tool-6f0e4b1c8d2a4f3e9b7a5c1d0e2f4a6b"
TOOL_ARGUMENTS = ['{"city": "', "Paris", '", "unit": "', "celsius", '"}']

LOGPROB_TOKENS = [("Paris", -0.0112, [("Paris", -0.0112), (" Paris", -4.61)]),
                  (".", -0.2031, [(".", -0.2031), ("!", -1.9876)])]  # fmt: skip

REASONING = ["The user asks", " for the capital of France.", " It is Paris."]
ANSWER = ["The capital", " of France", " is Paris."]


def _usage(prompt: int, completion: int, cached: int | None) -> dict[str, Any]:
    use: dict[str, Any] = {
        "prompt_tokens": prompt,
        "total_tokens": prompt + completion,
        "completion_tokens": completion,
    }
    if cached is not None:  # only with --enable-prompt-tokens-details
        use["prompt_tokens_details"] = {"cached_tokens": cached}
    return use


def _logprobs() -> dict[str, Any]:
    def entry(token: str, logprob: float) -> dict[str, Any]:
        return {"token": token, "logprob": logprob, "bytes": list(token.encode())}

    return {
        "content": [
            entry(tok, lp) | {"top_logprobs": [entry(t, p) for t, p in top]}
            for tok, lp, top in LOGPROB_TOKENS
        ]
    }


def chat_body(rid: str, model: str, scenario: str, text: str) -> dict[str, Any]:
    """A non-streamed ``chat.completion`` as vLLM sends it."""
    message: dict[str, Any] = {"role": "assistant", "reasoning_content": None, "content": text,
                               "tool_calls": []}  # fmt: skip
    finish, logprobs = "stop", None
    if scenario == "tools":
        call = {"name": "get_weather", "arguments": "".join(TOOL_ARGUMENTS)}
        message |= {
            "content": None,
            "tool_calls": [{"id": TOOL_CALL_ID, "type": "function", "function": call}],
        }
        finish = "tool_calls"
    elif scenario == "logprobs":
        message["content"] = "".join(t for t, _, _ in LOGPROB_TOKENS)
        logprobs = _logprobs()
    elif scenario == "reasoning":
        message |= {"reasoning_content": "".join(REASONING), "content": "".join(ANSWER)}
    return {
        "id": rid,
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": logprobs,
                "finish_reason": finish,
                "stop_reason": None,
            }
        ],
        "usage": _usage(212, 29, 192),
        "prompt_logprobs": None,
        "kv_transfer_params": None,
        "system_fingerprint": FINGERPRINT,
    }


def chat_chunks(
    rid: str, model: str, scenario: str, text: str, include_usage: bool
) -> list[dict[str, Any]]:
    """The ``chat.completion.chunk`` events of the same answer, streamed."""

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish} | extra
        return {"id": rid, "object": "chat.completion.chunk", "created": CREATED, "model": model,
                "system_fingerprint": FINGERPRINT, "choices": [choice]}  # fmt: skip

    out = [chunk({"role": "assistant", "content": ""})]
    if scenario == "tools":
        out.append(chunk({"tool_calls": [{"id": TOOL_CALL_ID, "type": "function", "index": 0,
                                          "function": {"name": "get_weather"}}]}))  # fmt: skip
        out += [
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": a}}]})
            for a in TOOL_ARGUMENTS
        ]
        out.append(chunk({"content": ""}, "tool_calls", stop_reason=None))
    elif scenario == "logprobs":
        for tok, lp, top in LOGPROB_TOKENS:
            entry = {"token": tok, "logprob": lp, "bytes": list(tok.encode()), "top_logprobs": [
                {"token": t, "logprob": p, "bytes": list(t.encode())} for t, p in top]}  # fmt: skip
            out.append(chunk({"content": tok}, logprobs={"content": [entry]}))
        out.append(chunk({"content": ""}, "stop", stop_reason=None))
    else:
        if scenario == "reasoning":
            out += [chunk({"reasoning_content": piece}) for piece in REASONING]
            pieces = ANSWER
        else:
            pieces = [text[: len(text) // 2], text[len(text) // 2 :]]
        out += [chunk({"content": piece}) for piece in pieces]
        out.append(chunk({"content": ""}, "stop", stop_reason=None))
    if include_usage:
        out.append({"id": rid, "object": "chat.completion.chunk", "created": CREATED,
                    "model": model, "choices": [], "usage": _usage(212, 29, 192)})  # fmt: skip
    return out


def sse(chunks: list[dict[str, Any]]) -> str:
    return "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
