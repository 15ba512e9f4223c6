"""Schemathesis over the app's own OpenAPI (``/openapi.json``): generated requests,
valid and invalid, against every /admin and /v1 operation of a live gateway
(tiny Llama engine, real embedder, SQLite). No response may be a 5xx. Admin
operations run with the admin token, /v1 operations with a tenant key (and a
share without any credentials); bounded to a few examples per operation."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from prefix.model.loader import LoadedModel
from semantic import Embedder
from tests.gateway.admin_support import ADMIN, admin, admin_gateway, new_tenant
from tests.gateway.conftest import Gateway

schemathesis = pytest.importorskip("schemathesis")
hypothesis = pytest.importorskip("hypothesis")

pytestmark = pytest.mark.slow

EXAMPLES = 6  # per operation and generation mode
TARGET = "fuzz-target"  # a tenant the admin operations also run against
BUDGET_S = 60.0


@pytest.fixture(scope="module")
def gw(
    tiny_llama: LoadedModel, embedder: Embedder, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateway]:
    with admin_gateway(tmp_path_factory.mktemp("admin-fuzz"), tiny_llama, embedder) as gateway:
        yield gateway


def run_operation(
    operation: Any,
    mode: Any,
    headers: dict[str, str],
    url: str,
    model: str | None = None,
    path_parameters: dict[str, str] | None = None,
) -> list[str]:
    """Generated cases of one operation; returns descriptions of 5xx answers. ``model``
    replaces the body's model (so generated chat requests reach the engine);
    ``path_parameters`` pins path parameters (an existing tenant)."""
    from hypothesis import HealthCheck, Phase, given, settings

    failures: list[str] = []

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode, path_parameters=path_parameters))
    def check(case: Any) -> None:
        if operation.path.startswith("/v1/") and isinstance(case.body, dict):
            # Short generations on a CPU: the length limit itself is not under test here.
            case.body["max_tokens"] = 2
            if model is not None:
                case.body["model"] = model
        response = case.call(base_url=url, headers=headers, timeout=30)
        if response.status_code >= 500:
            failures.append(
                f"{case.method} {case.formatted_path} {case.query} -> {response.status_code}: "
                f"{response.text[:300]} (body {str(case.body)[:300]})"
            )

    check()
    return failures


def ensure_target(gw: Gateway) -> None:
    """(Re)create the tenant ``TARGET`` (a fuzzed DELETE may have removed it), on a
    connection of its own. Not on one kept open across the fuzzing: uvicorn closes a
    connection idle for ``timeout_keep_alive`` (5 s) without a word, as HTTP/1.1 lets it,
    and a request sent just as it does so is reset (``httpx.ReadError``, a flake of a
    loaded ``make test``). A fresh connection has no such race, so any error on it is
    still the server's."""
    with admin(gw) as client:
        if client.get(f"/tenants/{TARGET}").status_code == 404:
            assert client.post("/tenants", json={"id": TARGET}).status_code == 201


def test_no_server_errors_over_the_openapi_schema(gw: Gateway) -> None:
    from schemathesis import GenerationMode

    positive, negative = GenerationMode.POSITIVE, GenerationMode.NEGATIVE
    with admin(gw) as client:
        key = new_tenant(client, "fuzz", {"rate_limit_rpm": 100_000})
    tenant_key = {"Authorization": f"Bearer {key}"}
    schema = schemathesis.openapi.from_dict(gw.app.openapi())
    operations = [
        result.ok()
        for result in schema.get_all_operations()
        if result.ok().path.startswith(("/admin", "/v1/"))
    ]
    assert len(operations) >= 20
    assert any(op.path == "/v1/chat/completions" for op in operations)
    started = time.monotonic()
    failures: list[str] = []
    for op in operations:
        runs: list[tuple[Any, dict[str, str], str | None, dict[str, str] | None]]
        if op.path.startswith("/admin"):
            runs = [(positive, ADMIN, None, None), (negative, ADMIN, None, None)]
            if "{tenant_id}" in op.path:  # also on a tenant that exists
                ensure_target(gw)
                runs.append((positive, ADMIN, None, {"tenant_id": TARGET}))
        else:
            runs = [
                (positive, tenant_key, gw.model, None),
                (negative, tenant_key, gw.model, None),
                (positive, {}, None, None),  # no credentials
            ]
        for mode, headers, model, pinned in runs:
            failures += run_operation(op, mode, headers, gw.url, model, pinned)
    elapsed = time.monotonic() - started
    assert not failures, "\n".join(failures)
    assert elapsed < BUDGET_S, elapsed
