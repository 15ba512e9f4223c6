"""Plain-text tables for the command line: aligned columns, no dependency, values
shortened so a row fits a terminal (``--json`` prints the untouched data)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

MAX_CELL = 60  # longer cells (questions, details) are cut with an ellipsis
#: What a terminal acts on rather than shows: C0 and C1 controls and DEL (an escape
#: sequence in a stored question retitled the operator's window, hid text, or worse;
#: a review, session 43) and the bidirectional overrides that reorder a line.
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _shown(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def cell(value: Any, max_len: int = MAX_CELL) -> str:
    """One value as table text: ``-`` for none, lists comma-joined, timestamps to the
    second (the API gives microseconds and an offset nobody reads in a table)."""
    if value is None:
        text = "-"
    elif isinstance(value, bool):
        text = "yes" if value else "no"
    elif isinstance(value, float):
        text = f"{value:.4g}"
    elif isinstance(value, list | tuple):
        text = ", ".join(cell(v, max_len) for v in value) or "-"
    elif isinstance(value, dict):
        text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    else:
        text = str(value)
        if len(text) >= 19 and text[4] == "-" and text[10] == "T":  # ISO timestamp
            text = text[:19].replace("T", " ")
    text = " ".join(text.split())  # a newline inside a cell would break the table
    text = _CONTROLS.sub(_shown, text)  # what users wrote, shown and never obeyed
    return text if len(text) <= max_len else text[: max_len - 1] + "…"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Columns padded to their widest cell; an empty listing says so."""
    if not rows:
        return "(none)"
    cells = [[cell(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines)


def fields(record: dict[str, Any], keys: Sequence[str] | None = None) -> str:
    """One record as ``name  value`` lines (a two-column table without a header)."""
    names = list(keys) if keys is not None else list(record)
    width = max((len(k) for k in names), default=0)
    return "\n".join(f"{k.ljust(width)}  {cell(record.get(k), 200)}" for k in names)
