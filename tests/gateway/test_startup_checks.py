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
        # session 45's review: each was a traceback from create_engine
        ("postgresql+psycopg2://me:s3cret@127.0.0.1/db", "uses the driver 'psycopg2'"),
        ("mysql://me:s3cret@127.0.0.1/x", "(ModuleNotFoundError: no driver for it here)"),
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


def test_a_data_dir_that_cannot_hold_the_file_is_one_line(tmp_path: Path) -> None:
    """A data dir that is a file: uvicorn's FileExistsError traceback before (session
    45's review), and doctor said OK."""
    blocker = tmp_path / "afile"
    blocker.write_text("")
    with pytest.raises(ValueError, match=r"directory .* cannot be created \(FileExistsError\)"):
        check_database(f"sqlite:///{blocker / 'cachegate.db'}")
    check_database(f"sqlite:///{tmp_path / 'new' / 'deeper' / 'cachegate.db'}")  # made
    assert (tmp_path / "new" / "deeper").is_dir()


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["serve", "--port", "86896"], "86896 is not a port"),
        (["serve", "--port", "0"], "0 must be at least 1"),
        (["engine", "--kv-cache-mib", "0"], "0 must be at least 1"),
    ],
)
def test_flags_out_of_range_are_refused(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """--port 86896 listened on 21360 (wrapped at 65536), --port 0 fell back to the
    setting and --kv-cache-mib 0 to the default, all silently (session 45's review)."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert said in capsys.readouterr().err


def test_a_model_path_that_does_not_exist_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from gateway.settings import get_settings

    monkeypatch.setenv("CACHEGATE_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("CACHEGATE_MODEL_PATH", "/nonexistent/model.gguf")
    get_settings.cache_clear()
    try:
        assert main(["serve"]) == 2
    finally:
        get_settings.cache_clear()
    assert main(["generate", "--model", "/nonexistent/x.gguf", "hi"]) == 2
    err = capsys.readouterr().err
    assert "error: CACHEGATE_MODEL_PATH /nonexistent/model.gguf does not exist" in err
    assert "error: model path does not exist" in err and "Traceback" not in err
