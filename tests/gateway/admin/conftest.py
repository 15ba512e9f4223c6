"""Fixtures of the admin API tests: one live admin gateway per test module (over the
tiny random Llama and the real embedder, in the module's own data directory) and an
admin client. A module that needs another gateway defines its own ``gw``."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from prefix.model.loader import LoadedModel
from semantic import Embedder
from tests.gateway.admin_support import admin, admin_gateway
from tests.gateway.conftest import Gateway


@pytest.fixture(scope="module")
def gw(
    request: pytest.FixtureRequest,
    tiny_llama: LoadedModel,
    embedder: Embedder,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Gateway]:
    data_dir = tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1])
    with admin_gateway(data_dir, tiny_llama, embedder) as gateway:
        yield gateway


@pytest.fixture
def client(gw: Gateway) -> Iterator[httpx.Client]:
    with admin(gw) as c:
        yield c
