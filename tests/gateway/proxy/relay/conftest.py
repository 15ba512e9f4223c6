"""Per module: a scripted upstream (its handler swapped per test) and a live gateway
in front of it, with one tenant. A module's ``GATEWAY_SETTINGS`` (a dict) adds to the
gateway's settings."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.app import Components
from semantic import Embedder
from tests.gateway.conftest import Gateway, gateway_settings, running_gateway
from tests.gateway.proxy.relay.support import Scripted
from tests.live_server import serving


@pytest.fixture(scope="module")
def up() -> Iterator[Scripted]:
    scripted = Scripted()
    with serving(scripted.app()) as url:
        scripted.url = url
        yield scripted


@pytest.fixture(scope="module")
def gw(
    up: Scripted,
    embedder: Embedder,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Iterator[Gateway]:
    data_dir: Path = tmp_path_factory.mktemp("relay")
    extra = getattr(request.module, "GATEWAY_SETTINGS", {})
    settings = gateway_settings(data_dir, upstream_url=up.url, **extra)
    with running_gateway(settings, Components(embedder=embedder)) as gateway:
        yield gateway


@pytest.fixture
def tenant(gw: Gateway) -> tuple[str, str]:
    return gw.tenant("relay")
