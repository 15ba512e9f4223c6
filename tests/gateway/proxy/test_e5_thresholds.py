"""Under ``CACHEGATE_EMBEDDER=e5`` a tenant's thresholds are MiniLM cosines, as under
``auto``: the gateway puts them on e5's scale (semantic/embedder_routed.py
``knobs_on_e5_scale``). Read raw, the default 0.89 served different questions whose e5
cosine is 0.9 and more (44% of translated Chinese hard negatives with the verifier
off). Here with the verifier off, where the tenant's ``threshold`` decides alone."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gateway.policy import TenantPolicy
from semantic.embedder_e5 import E5Embedder
from semantic.embedder_routed import on_routed_scale
from tests.gateway import vllm_recordings as rec
from tests.gateway.admin_support import admin
from tests.gateway.conftest import Gateway, chat_body
from tests.gateway.proxy.knob_support import knob_gateway, semantic_header

LOGIN = "怎么修改登录密码"  # how do I change my login password


@pytest.fixture(scope="module")
def e5() -> E5Embedder:
    return E5Embedder(progress=False)


@pytest.fixture(scope="module")
def gw(e5: E5Embedder, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    with knob_gateway(tmp_path_factory.mktemp("e5"), e5) as g:
        yield g


@pytest.mark.parametrize(
    ("stored", "asked", "e5_cosine", "served"),
    [
        # the same question in other words: above 0.9656 (0.89 on e5's scale)
        (LOGIN, "如何更改我的登录密码", 0.9864, True),
        # different answers above the raw 0.89: the payment password, not the login one;
        # cancelling an order, not checking it
        (LOGIN, "怎么修改支付密码", 0.9495, False),
        ("我想取消订单", "我想查询订单状态", 0.9166, False),
    ],
)
def test_the_default_threshold_is_read_on_e5s_scale(
    gw: Gateway, e5: E5Embedder, stored: str, asked: str, e5_cosine: float, served: bool
) -> None:
    a, b = e5.embed([stored, asked])
    assert float(a @ b) == pytest.approx(e5_cosine, abs=2e-3)
    # each negative sits where the raw 0.89 served it and the mapped 0.9656 does not
    assert served or 0.89 <= e5_cosine < on_routed_scale(0.89)
    key = gw.tenant("e5", TenantPolicy(sample_rate=0.0))[1]
    assert semantic_header(gw, key, stored).startswith("miss")
    assert semantic_header(gw, key, stored) == "hit"  # positive control: the same question
    header = semantic_header(gw, key, asked)
    assert header == ("hit" if served else "miss:below_threshold"), (header, e5_cosine)


def test_explain_gives_the_threshold_on_e5s_scale_and_the_knob_as_set(gw: Gateway) -> None:
    tenant, key = gw.tenant("e5", TenantPolicy(sample_rate=0.0, threshold=0.80))
    assert semantic_header(gw, key, LOGIN).startswith("miss")
    with admin(gw) as client:
        asked = chat_body(rec.MODEL, "怎么修改支付密码")
        report = client.post(f"/tenants/{tenant}/cache/explain", json={"body": asked}).json()
        # stopped before the search (temperature above the tenant's maximum): the
        # threshold shown is still the one a search would apply, not the raw knob
        hot = asked | {"temperature": 1.5}
        skipped = client.post(f"/tenants/{tenant}/cache/explain", json={"body": hot}).json()
    assert skipped["decision"] == "skipped"
    for shown in (report, skipped):
        assert shown["threshold"] == pytest.approx(on_routed_scale(0.80))  # 0.9375
        assert shown["threshold_setting"] == 0.80  # the knob, a MiniLM cosine
    # 0.9495 on e5's scale clears 0.9375: a tenant that loosens the knob gets what it asks
    assert report["decision"] == "hit"
