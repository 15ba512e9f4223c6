"""Timing a call that may block (a database lock, a stalled server) without the test
hanging with it: the call runs on a daemon thread, and the test fails after a bound."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any


def timed(fn: Callable[[], Any], limit: float = 30.0) -> tuple[Any, float]:
    """(result or the exception raised, seconds); fails if still blocked after ``limit``."""
    out: dict[str, Any] = {}

    def run() -> None:
        started = time.monotonic()
        try:
            out["result"] = fn()
        except Exception as exc:
            out["result"] = exc
        out["took"] = time.monotonic() - started

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(limit)
    assert not worker.is_alive(), f"still blocked after {limit} s"
    return out["result"], out["took"]
