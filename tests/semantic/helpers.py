"""Shared test helpers: server URLs, an injected clock, request builders and a
tiny real validator."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from numpy.typing import NDArray

from semantic.partition import SemanticQuery

PG_SERVER_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
#: Nothing listens on port 1: connection refused at once.
UNREACHABLE_PG_URL = "postgresql+psycopg://postgres@127.0.0.1:1/test"


class ManualClock:
    """An injected clock: aware UTC, moves only when a test says so."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2025, 1, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


SYSTEM = "You are a helpful support assistant."
STORED = "How do I reset my password?"
PARAPHRASE = "How can I reset my password?"


def chat(
    question: str,
    *,
    tenant: str = "tenant-a",
    model: str = "smollm2-135m",
    system: str = SYSTEM,
    history: Sequence[Mapping[str, Any]] = (),
    **params: Any,
) -> SemanticQuery:
    messages = [{"role": "system", "content": system}, *history]
    messages.append({"role": "user", "content": question})
    body = {"model": model, "messages": messages, "temperature": 0.0, "max_tokens": 64, **params}
    return SemanticQuery.from_chat(tenant=tenant, body=body)


def reply(text: str = "Use the 'forgot password' link.", finish: str = "stop") -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "smollm2-135m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": finish,
            }
        ],
        "usage": {"prompt_tokens": 20, "completion_tokens": 8, "total_tokens": 28},
    }


class DigitValidator:
    """A real, deliberately tiny HitValidator: digit runs must match exactly, and
    questions asking for the latest/current state are time-sensitive."""

    def extract(self, text: str, *, scope: str = "") -> dict[str, Any]:
        return {"number": re.findall(r"\d+", text)}

    def guard(self, question: str, guards: Collection[str], *, scope: str = "") -> str | None:
        if "time_sensitive" in guards and re.search(r"\b(latest|now|current)\b", question, re.I):
            return "guarded:time_sensitive"
        return None

    def check(
        self,
        question: str,
        cached_question: str,
        cached_entities: Mapping[str, Any] | None,
        score: float,
        kinds: Collection[str] | None,
        guards: Collection[str],
        *,
        scope: str = "",
    ) -> str | None:
        if kinds is not None and "number" not in kinds:
            return None
        cached = (cached_entities or {}).get("number", [])
        if sorted(self.extract(question)["number"]) != sorted(cached):
            return "entity_mismatch:number"
        return None


def unit_vectors(rng: np.random.Generator, n: int, dim: int) -> NDArray[np.float32]:
    """``n`` random unit vectors of ``dim`` dimensions (float32)."""
    x = rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)
