"""Log output of ``cachegate serve`` and ``cachegate engine``: text or one JSON object per line.

``CACHEGATE_LOG_FORMAT=text`` (the default, for a terminal) prints
``time level logger message``. ``json`` prints every record as one JSON object:
``ts``, ``level``, ``logger``, ``message`` and, flattened beside them, the
structured fields the record carries in ``extra`` (the access lines of the gateway,
``gateway/request_log.py``, and of the engine server, ``prefix/serve/access_log.py``,
put all their values there). uvicorn's own lines go through the same formatter in
json mode, so a log pipeline reads one format.

:func:`configure_logging` is called once, at start, by the CLI.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

from gateway.settings import Settings

#: Attributes every LogRecord has; anything else on a record came from ``extra``.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
    "color_message",  # uvicorn's copy of the message with terminal colours
}

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

#: PostgreSQL quotes row values in an error's DETAIL ("Failing row contains (…)", "Key
#: (…)=(…) already exists"): the question or answer a failed write carried. The engines
#: hide bound parameters (``hide_parameters=True``), but the server's own message is in
#: the exception's text, so a logged traceback drops each DETAIL up to the next line
#: that is the traceback's or SQLAlchemy's own (a value may span lines).
_DETAIL = re.compile(r"^\s*DETAIL:")
_AFTER_DETAIL = re.compile(
    r"^\s*(HINT:|CONTEXT:|\[SQL:|\[parameters:|\(Background on this error|Traceback \(|"
    r"The above exception|During handling of|File \")"
)


def redact_exception_text(text: str) -> str:
    """A formatted traceback without the row values a database error may quote."""
    out: list[str] = []
    skipping = False
    for line in text.split("\n"):
        if _DETAIL.match(line):
            out.append(line[: line.index("DETAIL:")] + "DETAIL: (values not logged)")
            skipping = True
        elif skipping and not _AFTER_DETAIL.match(line):
            continue
        else:
            skipping = False
            out.append(line)
    return "\n".join(out)


class TextFormatter(logging.Formatter):
    """``time level logger message``; tracebacks without database row values."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        # the traceback may have been formatted (and cached) by another handler first
        return redact_exception_text(text) if record.exc_info or record.exc_text else text


class JsonFormatter(logging.Formatter):
    """One JSON object per record: fixed keys first, then the record's ``extra`` fields."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_") and key not in out:
                out[key] = value
        if record.exc_info:
            out["exception"] = redact_exception_text(self.formatException(record.exc_info))
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        # default=str: a field that is not JSON (a Path, an enum) is written as text
        # rather than losing the whole line.
        return json.dumps(out, ensure_ascii=False, default=str)


def formatter(log_format: str) -> logging.Formatter:
    return JsonFormatter() if log_format == "json" else TextFormatter(TEXT_FORMAT)


def configure_cli_logging(stream: TextIO | None = None) -> None:
    """Before a command reads its settings: WARNING and up as ``level logger message``,
    by a handler :func:`configure_logging` replaces. ``logging.basicConfig``'s handler
    was kept beside it: every line of ``serve`` came out twice, the first copy without
    the redaction (a database error's row values) and, under json, as plain text (a
    review, session 40)."""
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "_cachegate", False)]:
        root.removeHandler(old)
    if root.handlers:  # as basicConfig: a host that set logging up (a test run) keeps it
        return
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(TextFormatter("%(levelname)s %(name)s %(message)s"))
    handler._cachegate = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(logging.WARNING)


def configure_logging(settings: Settings, stream: TextIO | None = None) -> None:
    """One handler on the root logger with the configured formatter; the ``cachegate``
    loggers at INFO. Replaces a handler an earlier call installed (idempotent)."""
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "_cachegate", False)]:
        root.removeHandler(old)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(formatter(settings.log_format))
    handler._cachegate = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    logging.getLogger("cachegate").setLevel(logging.INFO)


def uvicorn_log_config(settings: Settings) -> dict[str, Any] | None:
    """What ``uvicorn.run(log_config=...)`` gets: its own coloured set-up for text;
    None for json, so uvicorn's loggers propagate to the root handler above."""
    if settings.log_format == "json":
        return None
    from uvicorn.config import LOGGING_CONFIG

    return dict(LOGGING_CONFIG)
