"""Shared parts of the engine server tests (test_server.py, test_server_openai.py):
waiting, OpenAI-error and SSE checks, tiny-Llama request helpers and the table of
bad requests.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import httpx

from prefix.serve.engine import PrefixEngine

KEY = "engine-secret"


def wait_until(cond: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def assert_openai_error(r: httpx.Response, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert isinstance(err["message"], str) and err["message"]
    assert err["type"] == ("invalid_request_error" if status < 500 else "server_error")
    return err


def assert_idle(engine: PrefixEngine) -> None:
    assert wait_until(lambda: engine.pool.num_used_blocks == 0 and not engine.has_unfinished())
    engine.pool.check_integrity()


def sse_payloads(text: str) -> list[Any]:
    events = [e for e in text.split("\n\n") if e.strip()]
    assert all(e.startswith("data: ") for e in events), events
    assert events[-1] == "data: [DONE]"
    return [json.loads(e[len("data: ") :]) for e in events[:-1]]


def words(n: int, start: int) -> str:
    return " ".join(f"t{3 + (start + i) % 125}" for i in range(n))


def complete(url: str, prompt: str, headers: Any = None, **body: Any) -> dict[str, Any]:
    payload = {"model": "tiny", "prompt": prompt, "max_tokens": 2, "temperature": 0} | body
    r = httpx.post(f"{url}/v1/completions", json=payload, headers=headers or {}, timeout=30)
    assert r.status_code == 200, r.text
    return dict(r.json())


def cached(resp: dict[str, Any]) -> int:
    return int(resp["usage"]["prompt_tokens_details"]["cached_tokens"])


CHAT = "/v1/chat/completions"
COMP = "/v1/completions"
MSGS = [{"role": "user", "content": "t5 t6 t7"}]
BAD_INPUT: list[tuple[str, str, Any, int, str | None]] = [
    # (id, path, body (bytes are sent raw), status, expected param)
    ("malformed-json", CHAT, b'{"model": "tiny", "messages": [', 400, None),
    ("not-an-object", CHAT, b"[1, 2]", 400, None),
    ("empty-body", CHAT, b"", 400, None),
    ("nan-literal", CHAT, b'{"model": "tiny", "messages": [], "temperature": NaN}', 400, None),
    ("missing-messages", CHAT, {"model": "tiny"}, 400, "messages"),
    ("missing-model", CHAT, {"messages": MSGS}, 400, "model"),
    ("messages-int", CHAT, {"model": "tiny", "messages": 5}, 400, "messages"),
    (
        "max-tokens-str",
        CHAT,
        {"model": "tiny", "messages": MSGS, "max_tokens": "x"},
        400,
        "max_tokens",
    ),
    (
        "max-tokens-numeric-str",
        CHAT,
        {"model": "tiny", "messages": MSGS, "max_tokens": "5"},
        400,
        "max_tokens",
    ),
    ("n-5", CHAT, {"model": "tiny", "messages": MSGS, "n": 5}, 400, "n"),
    (
        "negative-max-tokens",
        CHAT,
        {"model": "tiny", "messages": MSGS, "max_tokens": -1},
        400,
        "max_tokens",
    ),
    (
        "zero-max-completion-tokens",
        CHAT,
        {"model": "tiny", "messages": MSGS, "max_completion_tokens": 0},
        400,
        "max_tokens",
    ),
    ("unknown-model", CHAT, {"model": "gpt-9", "messages": MSGS}, 404, "model"),
    (
        "oversize-body",
        CHAT,
        {"model": "tiny", "messages": [{"role": "user", "content": "t5 " * 20_000}]},
        413,
        None,
    ),
    ("empty-messages", CHAT, {"model": "tiny", "messages": []}, 400, "messages"),
    (
        "unknown-role",
        CHAT,
        {"model": "tiny", "messages": [{"role": "wizard", "content": "t5"}]},
        400,
        "messages",
    ),
    (
        # the legacy role no chat template renders: refused naming the roles it takes
        "function-role",
        CHAT,
        {"model": "tiny", "messages": [{"role": "function", "name": "f", "content": "t5"}]},
        400,
        "messages",
    ),
    (
        "image-part",
        CHAT,
        {
            "model": "tiny",
            "messages": [
                {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}
            ],
        },
        400,
        "messages",
    ),
    (
        "temperature-5",
        CHAT,
        {"model": "tiny", "messages": MSGS, "temperature": 5},
        400,
        "temperature",
    ),
    (
        "temperature-bool",
        CHAT,
        {"model": "tiny", "messages": MSGS, "temperature": True},
        400,
        "temperature",
    ),
    ("seed-too-big", CHAT, {"model": "tiny", "messages": MSGS, "seed": 2**64}, 400, "seed"),
    ("top-p-0", CHAT, {"model": "tiny", "messages": MSGS, "top_p": 0}, 400, "top_p"),
    ("five-stops", CHAT, {"model": "tiny", "messages": MSGS, "stop": list("abcde")}, 400, "stop"),
    ("empty-stop", CHAT, {"model": "tiny", "messages": MSGS, "stop": [""]}, 400, "stop"),
    ("stream-bad", CHAT, {"model": "tiny", "messages": 5, "stream": True}, 400, "messages"),
    (
        "too-many-tokens",
        CHAT,
        {"model": "tiny", "messages": MSGS, "max_tokens": 10_000},
        400,
        "messages",
    ),
    ("prompt-too-long", COMP, {"model": "tiny", "prompt": words(300, 0)}, 400, "prompt"),
    ("empty-prompt", COMP, {"model": "tiny", "prompt": ""}, 400, "prompt"),
    ("token-out-of-range", COMP, {"model": "tiny", "prompt": [5, 999]}, 400, "prompt"),
    ("two-prompts", COMP, {"model": "tiny", "prompt": ["t5", "t6"]}, 400, "prompt"),
    ("missing-prompt", COMP, {"model": "tiny"}, 400, "prompt"),
    ("cache-salt-int", COMP, {"model": "tiny", "prompt": "t5", "cache_salt": 3}, 400, "cache_salt"),
]
