"""Issue 14: the development tenant is made only by a development start
(``cachegate serve --dev``, which ``make serve`` runs), never by a production start."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import create_engine, select

from gateway.app_parts import dev_tenant
from gateway.cli import DEV_TENANT, build_parser, serve_settings
from gateway.models import Tenant
from gateway.settings import Settings
from gateway.tenants import TenantStore
from migrations.runner import upgrade_database


def _settings(tmp_path: Path, **extra: object) -> Settings:
    return Settings(_env_file=None, data_dir=tmp_path, **extra)  # type: ignore[arg-type]


def _tenants_after_start(s: Settings, url: str) -> list[str]:
    store = TenantStore(create_engine(url))
    dev_tenant(s, store)  # what the app's start-up runs
    with store.sessions() as db:
        return list(db.scalars(select(Tenant.id)))


def test_a_production_start_makes_no_dev_tenant(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'prod.db'}"
    upgrade_database(url)
    s = serve_settings(build_parser().parse_args(["serve"]), _settings(tmp_path))
    assert s.dev_tenant is None
    assert _tenants_after_start(s, url) == []


def test_serve_dev_makes_the_dev_tenant(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'dev.db'}"
    upgrade_database(url)
    s = serve_settings(build_parser().parse_args(["serve", "--dev"]), _settings(tmp_path))
    assert s.dev_tenant == DEV_TENANT
    assert _tenants_after_start(s, url) == [DEV_TENANT]  # positive control
    # An operator's own name for it is kept.
    named = serve_settings(
        build_parser().parse_args(["serve", "--dev"]), _settings(tmp_path, dev_tenant="mine")
    )
    assert named.dev_tenant == "mine"


def test_the_dev_key_names_the_port_it_listens_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'port.db'}"
    upgrade_database(url)
    args = build_parser().parse_args(["serve", "--dev", "--port", "8765", "--host", "0.0.0.0"])
    s = serve_settings(args, _settings(tmp_path))
    assert (s.host, s.port) == ("0.0.0.0", 8765)
    _tenants_after_start(s, url)
    assert "http://0.0.0.0:8765/v1" in capsys.readouterr().out
    # control: without the flags, the settings' own
    plain = serve_settings(build_parser().parse_args(["serve"]), _settings(tmp_path, port=9001))
    assert plain.port == 9001


def test_the_printed_curl_works_as_pasted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It named the model "<see /v1/models>" (a 404 as pasted) and no max_tokens (the
    engine then writes to the end of its window: minutes on a CPU); session 45's review.
    The in-process engine's id is known at start; an HTTP upstream's is not (the
    control: it says where to read it)."""
    url = f"sqlite:///{tmp_path / 'snippet.db'}"
    upgrade_database(url)
    s = serve_settings(build_parser().parse_args(["serve", "--dev"]), _settings(tmp_path))
    store = TenantStore(create_engine(url))
    dev_tenant(s, store, "SmolLM2-135M-Instruct.Q4_1")
    out = capsys.readouterr().out
    assert '"model": "SmolLM2-135M-Instruct.Q4_1", "max_tokens": 128' in out
    other = serve_settings(
        build_parser().parse_args(["serve", "--dev"]), _settings(tmp_path, dev_tenant="other")
    )
    dev_tenant(other, store, None)
    assert '"model": "<see /v1/models>", "max_tokens": 128' in capsys.readouterr().out
