"""A failed statement's bound values (questions, answers) never reach its exception's
text, and so never a log: every engine ``make_engine`` builds hides them. Real SQLite
files, and the real PostgreSQL when it runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, exc, text

from semantic.store_db import make_engine

PG_SERVER_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"  # trust auth here and in CI
SECRET = "what is the balance of account 4417 for jane doe"


def failed_statement_text(engine: Engine) -> str:
    with pytest.raises(exc.DBAPIError) as failed, engine.begin() as conn:
        conn.execute(text("INSERT INTO no_such_table VALUES (:q)"), {"q": SECRET})
    return str(failed.value)


def test_a_plain_engine_would_quote_the_value(tmp_path: Path) -> None:
    # positive control: what SQLAlchemy does by default, and what the test would catch
    assert SECRET in failed_statement_text(create_engine(f"sqlite:///{tmp_path / 'a.db'}"))


def test_the_stores_sqlite_engine_hides_bound_values(tmp_path: Path) -> None:
    message = failed_statement_text(make_engine(f"sqlite:///{tmp_path / 'b.db'}"))
    assert "no_such_table" in message and SECRET not in message


def test_the_stores_postgres_engine_hides_bound_values() -> None:
    engine = make_engine(PG_SERVER_URL, connect_timeout=3)
    try:
        engine.connect().close()
    except exc.OperationalError:
        pytest.skip("PostgreSQL on 127.0.0.1:5432 is unreachable")
    message = failed_statement_text(engine)
    assert "no_such_table" in message and SECRET not in message
