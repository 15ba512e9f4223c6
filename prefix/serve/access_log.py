"""One engine-server request as it goes through, for its ``cachegate.access`` log line:
request id, namespace id (a digest, never the key or the namespace), status, TTFT,
token counts and duration. With tracing on, ``on_finish`` (``prefix/serve/tracing.py``)
turns the same request into its spans once the line is written."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from prefix.serve.engine import RequestOutput

access_log = logging.getLogger("cachegate.access")


@dataclass
class RequestLog:
    """One request as it goes through the server, for the access log."""

    request_id: str
    path: str
    namespace_id: str
    started: float = field(default_factory=time.perf_counter)
    first_token_at: float | None = None
    last: RequestOutput | None = None
    traceparent: str | None = None  # the caller's W3C trace context header, if any
    on_finish: Callable[[RequestLog, int | str], None] | None = None

    def log(self, status: int | str, **extra: Any) -> None:
        ttft = None if self.first_token_at is None else self.first_token_at - self.started
        fields = {
            "request_id": self.request_id,
            "namespace_id": self.namespace_id,
            "status": status,
            "ttft_ms": None if ttft is None else round(ttft * 1000, 2),
            "duration_ms": round((time.perf_counter() - self.started) * 1000, 2),
        }
        if self.last is not None:
            fields |= {
                "prompt_tokens": self.last.prompt_tokens,
                "cached_tokens": self.last.cached_tokens,
                "completion_tokens": self.last.completion_tokens,
                "finish_reason": self.last.finish_reason,
            }
        fields |= extra
        text = " ".join(f"{k}={v}" for k, v in fields.items() if v is not None)
        access_log.info("POST %s %s", self.path, text, extra=fields | {"path": self.path})
        if self.on_finish is not None:
            try:
                self.on_finish(self, status)
            except Exception:  # tracing must never fail a request
                access_log.exception("request hook failed")

    def saw(self, out: RequestOutput) -> None:
        if self.first_token_at is None and out.new_token_ids:
            self.first_token_at = time.perf_counter()
        self.last = out
