"""The ``cachegate`` console script, run as users run it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gateway.cli import main
from gateway.settings import get_settings
from prefix.config import EngineConfig


def run_cli(*args: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "gateway.cli", *args], capture_output=True, text=True, check=True
    )
    return out.stdout


def test_lab_defaults_as_in_the_seed() -> None:
    assert run_cli("lab").strip() == "reused=4 recompute=9"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--change-position", "9"], "reused=8 recompute=5"),
        (["--block-size", "8"], "reused=0 recompute=13"),
    ],
)
def test_lab_variants(capsys: pytest.CaptureFixture[str], args: list[str], expected: str) -> None:
    assert main(["lab", *args]) == 0
    assert capsys.readouterr().out.strip() == expected


def test_lab_explain_trace_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lab", "--explain", "--trace", "--numbers"]) == 0
    out = capsys.readouterr().out
    assert "first differing token: position 5" in out
    assert "lru" in out and "coverage" in out and "token hit rate" in out
    assert "saved 256 MiB" in out and "2.515x" in out


def test_lab_bad_argument_is_a_clean_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lab", "--change-position", "40"]) == 2
    assert "change_position" in capsys.readouterr().err


def run_engine_cli(monkeypatch: pytest.MonkeyPatch, args: list[str]) -> dict[str, object]:
    """``cachegate engine ARGS`` with run_server replaced: what it would have been given."""
    import prefix.serve.server as server

    seen: dict[str, object] = {}

    def fake_run_server(host: str, port: int, config: object, **kwargs: object) -> None:
        seen["config"], seen["one_pool"] = config, kwargs.get("one_pool")
        options = kwargs.get("uvicorn_options")
        seen["access_log"] = options.get("access_log") if isinstance(options, dict) else None

    monkeypatch.setattr(server, "run_server", fake_run_server)
    get_settings.cache_clear()
    try:
        main(["engine", *args])
    finally:
        get_settings.cache_clear()
    assert isinstance(seen["config"], EngineConfig)
    return seen


@pytest.mark.parametrize(
    ("flag", "expected"), [([], None), (["--threads", "1"], 1), (["--threads", "0"], None)]
)
def test_engine_threads_flag_reaches_the_engine_config(
    monkeypatch: pytest.MonkeyPatch, flag: list[str], expected: int | None
) -> None:
    monkeypatch.delenv("CACHEGATE_ENGINE_THREADS", raising=False)
    config = run_engine_cli(monkeypatch, flag)["config"]
    assert isinstance(config, EngineConfig)
    assert config.num_threads == expected


@pytest.mark.parametrize(
    ("flag", "pack", "one_pool"),
    [([], True, True), (["--no-pack-linears"], False, True), (["--legacy-threads"], True, False)],
)
def test_engine_pack_and_thread_flags(
    monkeypatch: pytest.MonkeyPatch, flag: list[str], pack: bool, one_pool: bool
) -> None:
    monkeypatch.delenv("CACHEGATE_ENGINE_PACK_LINEARS", raising=False)
    seen = run_engine_cli(monkeypatch, flag)
    config = seen["config"]
    assert isinstance(config, EngineConfig)
    assert config.pack_linears is pack and seen["one_pool"] is one_pool


@pytest.mark.parametrize(
    ("env", "flag", "expected"),
    [
        (None, [], "auto"),
        ("torch", [], "torch"),
        (None, ["--kernels", "native"], "native"),
        ("native", ["--kernels", "torch"], "torch"),
    ],
)
def test_engine_kernels_setting_and_flag(
    monkeypatch: pytest.MonkeyPatch, env: str | None, flag: list[str], expected: str
) -> None:
    if env is None:
        monkeypatch.delenv("CACHEGATE_ENGINE_KERNELS", raising=False)
    else:
        monkeypatch.setenv("CACHEGATE_ENGINE_KERNELS", env)
    config = run_engine_cli(monkeypatch, flag)["config"]
    assert isinstance(config, EngineConfig) and config.kernels == expected


def test_engine_pack_setting_reaches_the_engine_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CACHEGATE_ENGINE_PACK_LINEARS", "false")
    config = run_engine_cli(monkeypatch, [])["config"]
    assert isinstance(config, EngineConfig) and config.pack_linears is False


def test_the_waiting_share_setting_reaches_the_engine_config(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CACHEGATE_MAX_NUM_WAITING", "40")
    config = run_engine_cli(monkeypatch, [])["config"]
    assert isinstance(config, EngineConfig) and config.waiting_per_tenant == 30  # default
    monkeypatch.setenv("CACHEGATE_MAX_NUM_WAITING_PER_TENANT", "5")
    config = run_engine_cli(monkeypatch, [])["config"]
    assert isinstance(config, EngineConfig) and config.waiting_per_tenant == 5


def test_neither_server_writes_uvicorns_access_log(monkeypatch: pytest.MonkeyPatch) -> None:
    """uvicorn's access log wrote each raw path and query string: a client's model id
    from /v1/models/{id} (which the 404 does not quote back), tenant ids in admin paths
    whatever CACHEGATE_LOG_TENANT_IDS says. Both servers write their own access lines."""
    import uvicorn

    import gateway.logging_setup
    import prefix.serve.threads

    engine_options = run_engine_cli(monkeypatch, [])
    assert engine_options["access_log"] is False
    seen: dict[str, object] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: seen.update(kw))
    monkeypatch.setattr(gateway.logging_setup, "configure_logging", lambda s: None)
    # not this process's torch threads: serve gives them to the engine thread
    monkeypatch.setattr(prefix.serve.threads, "reserve_for_engine_thread", lambda: 1)
    get_settings.cache_clear()
    try:
        main(["serve", "--port", "1"])
    finally:
        get_settings.cache_clear()
    assert seen["access_log"] is False and seen["port"] == 1
    # idle client connections outlive a load balancer's (test_upstream_keepalive.py)
    assert seen["timeout_keep_alive"] == 75


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"CACHEGATE_ADMIN_URL": "http://127.0.0.1:9/gw/"}, "http://127.0.0.1:9/gw"),
        ({"CACHEGATE_HOST": "0.0.0.0", "CACHEGATE_PORT": "9"}, "http://127.0.0.1:9"),
    ],
)
def test_report_asks_the_admin_url_like_the_other_admin_commands(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    env: dict[str, str],
    expected: str,
) -> None:
    for name in ("CACHEGATE_ADMIN_URL", "CACHEGATE_HOST", "CACHEGATE_PORT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    try:
        assert main(["report", "--token", "t"]) == 1  # port 9: nothing listens
    finally:
        get_settings.cache_clear()
    assert f"cannot reach the gateway at {expected}:" in capsys.readouterr().err


def test_a_reader_that_leaves_early_gets_no_traceback() -> None:
    """``cachegate lab --explain | head -1``: the pipe closed, and each command ended in
    a BrokenPipeError traceback (session 45's review)."""
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway.cli", "lab", "--explain"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the first line
    err = proc.stderr.read().decode()
    proc.wait(timeout=120)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
