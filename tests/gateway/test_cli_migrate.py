"""``cachegate migrate``: the schema of the gateway's own database (its settings) or of
``--url``, upgraded, shown, or stepped back, on real SQLite and PostgreSQL; an
unreachable database is a one-line error that shows no password."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.cli import main
from gateway.settings import get_settings
from migrations.runner import alembic_config
from tests.gateway.conftest import PG_SERVER_URL
from tests.migrations.test_migrations import tables


def head() -> str:
    from alembic.script import ScriptDirectory

    return str(ScriptDirectory.from_config(alembic_config()).get_current_head())


def test_migrate_uses_the_gateways_own_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # an alembic.ini default would land here: it must not
    monkeypatch.setenv("CACHEGATE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("CACHEGATE_DATABASE_URL", raising=False)
    get_settings.cache_clear()
    try:
        assert main(["migrate"]) == 0
    finally:
        get_settings.cache_clear()
    db = tmp_path / "data" / "cachegate.db"
    assert f"revision {head()} (at head)" in capsys.readouterr().out
    assert "semantic_fences" in tables(f"sqlite:///{db}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]  # nothing else made


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_migrate_steps_back_and_up_again(
    tmp_path: Path,
    backend: str,
    request: pytest.FixtureRequest,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'x.db'}"
    else:
        url = f"{PG_SERVER_URL}?options=-csearch_path%3D{request.getfixturevalue('pg_schema')}"
    assert main(["migrate", "--url", url, "0011"]) == 0
    assert "revision 0011 (head is" in capsys.readouterr().out
    assert "semantic_fences" not in tables(url) and "tenants" in tables(url)
    assert main(["migrate", "--url", url]) == 0
    assert "semantic_fences" in tables(url)
    assert main(["migrate", "--url", url, "--downgrade", "0011"]) == 0
    assert "semantic_fences" not in tables(url)
    assert main(["migrate", "--url", url, "--show"]) == 0
    assert main(["migrate", "--url", url]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-2].endswith(f"revision 0011 (head is {head()})")  # --show changed nothing
    assert out[-1].endswith(f"revision {head()} (at head)")
    assert main(["migrate", "--url", url, "no-such-revision"]) == 2  # alembic's refusal


def test_an_unreachable_database_is_one_line_without_the_password(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = "postgresql+psycopg://cg:s3cretpw@127.0.0.1:1/cachegate?connect_timeout=2"
    assert main(["migrate", "--url", url]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: cannot reach postgresql+psycopg://cg:***@127.0.0.1:1")
    assert "s3cretpw" not in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("garbage", "is not a database URL this gateway can open (ArgumentError)"),
        ("postgresql+psycopg2://cg:s3cretpw@127.0.0.1/db", "uses the driver 'psycopg2'"),
        ("mysql://cg:s3cretpw@127.0.0.1/x", "(ModuleNotFoundError: no driver for it here)"),
    ],
)
def test_a_url_no_database_opens_is_one_line(
    url: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each was a 20-40 line traceback (session 45's review)."""
    assert main(["migrate", "--url", url]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and said in err and err.count("\n") == 1
    assert "s3cretpw" not in err and "Traceback" not in err


def test_a_data_dir_that_is_a_file_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "afile"
    blocker.write_text("")
    monkeypatch.setenv("CACHEGATE_DATA_DIR", str(blocker))
    get_settings.cache_clear()
    try:
        assert main(["migrate"]) == 2
    finally:
        get_settings.cache_clear()
    err = capsys.readouterr().err
    assert "cannot be created (FileExistsError)" in err and "Traceback" not in err
