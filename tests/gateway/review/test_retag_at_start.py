"""A restart re-tags the misfire samples of before session 35 with their language's
score scale (gateway/review/retag.py, started by gateway/ops.py), and the review API
says which samples count for the tenant's verifier cut (``refines_cut``). The real
gateway with the shipped verifier, a scripted upstream and real SQLite; the old
samples are written as session 34 wrote them (one id for both languages' weights)."""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session

from gateway.policy import TenantPolicy
from gateway.verification import GatewayVerifier
from semantic import Embedder
from tests.gateway.admin_support import admin
from tests.gateway.conftest import wait_until
from tests.gateway.proxy.test_verifier_hits import (  # noqa: F401 (fixtures by name)
    OPEN,
    samples,
    up,
    verified_gateway,
    verifier,
)
from tests.gateway.review.old_samples import old_sample
from tests.gateway.scripted_upstream import Upstream


def test_a_restart_retags_old_samples_by_language_and_the_review_says_what_counts(
    up: Upstream,  # noqa: F811 (the fixture imported above)
    embedder: Embedder,
    verifier: GatewayVerifier,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    # Samples of before session 35 carry one id for both languages' weights; a restart
    # re-tags them with their language's (gateway/review/retag.py), in the background.
    data_dir = tmp_path_factory.mktemp("retag")
    stored = {  # question -> (matched question, id stored)
        "How do I reset my password?": ("How can I reset my password?", verifier.legacy_scale_id),
        "怎么修改登录密码": ("如何更改我的登录密码", verifier.legacy_scale_id),
        "What is my balance?": ("What's my balance?", "0123456789abcdef"),  # other weights
    }
    with verified_gateway(data_dir, up, embedder, verifier) as g:
        tenant, _key = g.tenant("retag", TenantPolicy(**OPEN))
        with Session(g.app.state.db) as s, s.begin():
            for question, (matched, model) in stored.items():
                s.add(old_sample(tenant, question, matched, model))
    with verified_gateway(data_dir, up, embedder, verifier) as g, admin(g) as client:
        expected = {
            "How do I reset my password?": (verifier.en_scale_id, True),
            "怎么修改登录密码": (verifier.zh_scale_id, True),
            "What is my balance?": ("0123456789abcdef", False),  # left alone, counts for nothing
        }

        def seen() -> dict[str, tuple[str, bool]]:
            return {
                x["question"]: (x["verifier_model"], x["refines_cut"])
                for x in samples(client, tenant)
            }

        assert wait_until(lambda: seen() == expected), seen()
