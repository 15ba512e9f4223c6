"""What the engine hands back: per-step deltas and whole results (torch-free)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RequestOutput:
    """What one step produced for one request (a text delta, and usage when finished)."""

    request_id: str
    new_token_ids: list[int]
    delta: str
    finished: bool
    # once finished: "stop", "length", "abort", or "error" (its step failed; streams
    # raise StepFailedError instead of handing this output out)
    finish_reason: str | None
    prompt_tokens: int
    cached_tokens: int  # prompt tokens whose K/V was reused, not computed
    completion_tokens: int
    ttft_s: float | None
    # perf_counter() times for the engine server's spans (prefix/serve/tracing.py):
    # when the request arrived and when a prefill step first took it.
    arrival_at: float | None = None
    scheduled_at: float | None = None


@dataclass(frozen=True)
class GenerationResult:
    text: str
    token_ids: list[int]
    finish_reason: str
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    ttft_s: float
