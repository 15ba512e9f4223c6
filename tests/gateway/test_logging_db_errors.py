"""A database error's traceback in the log names no row value: PostgreSQL quotes the
failing row (or the duplicate key) in its DETAIL, which a failed write of a question or
an answer would put in the log beside the hidden bound parameters."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import DBAPIError

from gateway.logging_setup import configure_logging, redact_exception_text
from gateway.settings import Settings
from tests.gateway.conftest import PG_SERVER_URL

SECRET = "my salary is 91234 and\nmy wife's name\n\nis Alice"


@pytest.fixture
def failed_writes(pg_schema: str) -> Iterator[list[DBAPIError]]:
    """Real errors of the real PostgreSQL: a check violation and a duplicate key."""
    url = f"{PG_SERVER_URL}?options=-csearch_path%3D{pg_schema}"
    engine = create_engine(url, hide_parameters=True)
    errors: list[DBAPIError] = []
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE t (q text PRIMARY KEY, n int CHECK (n > 0))"))
        conn.execute(text("INSERT INTO t VALUES (:q, 1)"), {"q": SECRET})
    for n in (-1, 1):  # -1: "Failing row contains (…)"; 1: "Key (q)=(…) already exists"
        try:
            with engine.begin() as conn:
                conn.execute(text("INSERT INTO t VALUES (:q, :n)"), {"q": SECRET, "n": n})
        except DBAPIError as e:
            errors.append(e)
    engine.dispose()
    assert len(errors) == 2
    yield errors


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_logged_database_error_names_no_row_value(
    failed_writes: list[DBAPIError], log_format: str
) -> None:
    # control: the exceptions do carry the values, in both DETAIL forms
    assert "Failing row contains" in str(failed_writes[0]) and "91234" in str(failed_writes[0])
    assert "already exists" in str(failed_writes[1]) and "91234" in str(failed_writes[1])
    buf = io.StringIO()
    configure_logging(Settings(log_format=log_format), stream=buf)
    log = logging.getLogger("cachegate.test")
    try:
        for exc in failed_writes:
            try:
                raise exc
            except DBAPIError:
                log.exception("backfill failed")
    finally:
        configure_logging(Settings(), stream=io.StringIO())
    out = buf.getvalue()
    for word in ("91234", "salary", "Alice", "wife"):
        assert word not in out, out
    # what an operator needs is still there: the error, its constraint, the statement
    assert "CheckViolation" in out and "UniqueViolation" in out
    assert "t_n_check" in out and "INSERT INTO t" in out
    assert out.count("DETAIL: (values not logged)") == 4  # SQLAlchemy's and psycopg's


def test_redaction_leaves_other_tracebacks_alone() -> None:
    tb = 'Traceback (most recent call last):\n  File "x.py", line 1\nValueError: DETAILS: x'
    assert redact_exception_text(tb) == tb


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_serve_logs_each_line_once_and_redacted(
    failed_writes: list[DBAPIError], log_format: str
) -> None:
    """``cachegate`` set logging up twice: ``logging.basicConfig`` at the start of
    ``main`` and ``configure_logging`` once the settings were read; the first handler
    stayed, so every line came out twice, that copy unredacted and, under json, as plain
    text (a review). Both steps as ``main`` and ``serve`` take them, on one stream."""
    from gateway.logging_setup import configure_cli_logging

    buf = io.StringIO()
    root = logging.getLogger()
    before, level = list(root.handlers), root.level
    for h in before:  # as a process starts: no handler yet (pytest's put back below)
        root.removeHandler(h)
    try:
        configure_cli_logging(stream=buf)
        configure_logging(Settings(log_format=log_format), stream=buf)
        assert len(root.handlers) == 1  # the cachegate handler alone
        try:
            raise failed_writes[0]
        except DBAPIError:
            logging.getLogger("cachegate.test").exception("backfill failed")
    finally:
        configure_logging(Settings(), stream=io.StringIO())
        for h in [h for h in root.handlers if getattr(h, "_cachegate", False)]:
            root.removeHandler(h)
        for h in before:
            root.addHandler(h)
        root.setLevel(level)
    out = buf.getvalue()
    assert out.count("backfill failed") == 1, out
    assert "91234" not in out
    if log_format == "json":
        assert all(line.startswith("{") for line in out.splitlines() if line), out
