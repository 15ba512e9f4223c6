"""``cachegate serve`` refuses a database it cannot open with one line, before the
server starts (gateway/startup_checks.py): it failed inside uvicorn's lifespan, a
~150-line traceback and status 3 (a review, session 40). Real PostgreSQL and SQLite."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.cli import main
from gateway.startup_checks import check_database
from tests.gateway.conftest import PG_SERVER_URL


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("bogus://x", "not a database URL this gateway can open (NoSuchModuleError)"),
        ("postgresql+psycopg://me:s3cret@127.0.0.1:1/db", "did not answer (OperationalError)"),
    ],
)
def test_a_database_that_cannot_be_opened_is_one_line(url: str, said: str) -> None:
    with pytest.raises(ValueError, match=r"\(") as info:
        check_database(url, timeout=2)
    assert said in str(info.value)
    assert "s3cret" not in str(info.value)  # the password is never shown
    assert "\n" not in str(info.value)


def test_serve_exits_2_with_the_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from gateway.settings import get_settings

    monkeypatch.setenv("CACHEGATE_DATABASE_URL", "bogus://x")
    get_settings.cache_clear()
    try:
        assert main(["serve"]) == 2
    finally:
        get_settings.cache_clear()
    err = capsys.readouterr().err
    # its one line (another test's background thread may log beside it in one process)
    said = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(said) == 1
    assert said[0].startswith("error: CACHEGATE_DATABASE_URL is not a database URL")
    assert "Traceback" not in err


def test_databases_that_answer_pass(tmp_path: Path) -> None:
    check_database(PG_SERVER_URL)  # the controls: the real PostgreSQL ...
    check_database(f"sqlite:///{tmp_path / 'new.db'}")  # ... and a file the migration makes
