"""The migrations' own engine hides bound values (migrations/env.py): a failed
statement of a migration (0009 rewrites stored questions) named them in the start-up
log (a review, session 41)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import exc as sa_exc
from sqlalchemy import text

SECRET = "hunter2-zqx"


def test_the_migration_engine_hides_bound_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """migrations/env.py builds its engine with hide_parameters: a failed statement of a
    migration (0009 rewrites stored questions) named their values in the start-up log.
    The engine is captured as alembic's env builds it; what the flag does is shown on
    an engine made the same way."""
    import sqlalchemy

    from migrations.runner import upgrade_database

    made: list[dict[str, object]] = []
    real = sqlalchemy.create_engine

    def recording(*args: object, **kwargs: object) -> sqlalchemy.Engine:
        made.append(kwargs)
        return real(*args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(sqlalchemy, "create_engine", recording)
    upgrade_database(f"sqlite:///{tmp_path / 'm.db'}", "0001")
    assert made and all(k.get("hide_parameters") is True for k in made)
    engine = real(f"sqlite:///{tmp_path / 'm.db'}", hide_parameters=True)
    with engine.connect() as conn, pytest.raises(sa_exc.OperationalError) as caught:
        conn.execute(text("UPDATE no_such_table SET q = :q"), {"q": f"my salary {SECRET}"})
    assert SECRET not in str(caught.value)
    plain = real(f"sqlite:///{tmp_path / 'm.db'}")  # the control: without it, shown
    with plain.connect() as conn, pytest.raises(sa_exc.OperationalError) as caught:
        conn.execute(text("UPDATE no_such_table SET q = :q"), {"q": f"my salary {SECRET}"})
    assert SECRET in str(caught.value)
