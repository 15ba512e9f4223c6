"""Latin-script questions in other languages than English, through a live gateway with the
real embedders and the shipped verifier (semantic/latin_language.py): under ``auto``
they go to e5 and the multilingual cross-encoder, a paraphrase is served and a close
question with another answer is not, and a question is never served an answer of
the other language; under ``minilm`` they are neither served nor stored."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from gateway.policy import TenantPolicy
from gateway.verification import GatewayVerifier, load_verifier
from semantic import Embedder
from semantic.embedder_e5 import E5Embedder
from semantic.embedder_routed import RoutedEmbedder
from tests.gateway import vllm_recordings as rec
from tests.gateway.admin_support import admin
from tests.gateway.conftest import Gateway, chat_body, metric
from tests.gateway.proxy.test_verifier_hits import OPEN, ask, stored_then_asked, verified_gateway
from tests.gateway.scripted_upstream import Upstream, scripted_upstream

pytestmark = pytest.mark.slow

PASSWORD_ES = "¿Cómo cambio mi contraseña?"


@pytest.fixture(scope="module")
def up() -> Iterator[Upstream]:
    with scripted_upstream("vllm") as upstream:
        yield upstream


@pytest.fixture(scope="module")
def verifier() -> GatewayVerifier:
    return load_verifier()


@pytest.fixture(scope="module")
def routed_gw(
    up: Upstream,
    embedder: Embedder,
    verifier: GatewayVerifier,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Gateway]:
    routed = RoutedEmbedder(embedder, E5Embedder(progress=False))
    with verified_gateway(tmp_path_factory.mktemp("foreign"), up, routed, verifier) as g:
        yield g


@pytest.mark.parametrize(
    ("stored", "asked", "expected"),
    [
        # e5 0.99, the multilingual cross-encoder 0.995: served at the default target
        (PASSWORD_ES, "¿Cómo puedo cambiar mi contraseña?", "hit"),
        ("Wie ändere ich mein Passwort?", "Wie kann ich mein Passwort ändern?", "hit"),
        # lost against stolen: retrieved (e5 0.952), refused by the verifier (0.41)
        ("He perdido mi tarjeta", "Me han robado la tarjeta", "miss:verifier_refused"),
        # the same question in English: another route, cosine 0 to everything stored
        (PASSWORD_ES, "How do I change my password?", "miss:below_threshold"),
        ("How do I change my password?", PASSWORD_ES, "miss:below_threshold"),
    ],
    ids=["es_paraphrase", "de_paraphrase", "es_lost_vs_stolen", "es_then_en", "en_then_es"],
)
def test_other_languages_are_verified_by_the_multilingual_model(
    routed_gw: Gateway, stored: str, asked: str, expected: str
) -> None:
    _tenant, header = stored_then_asked(routed_gw, stored, asked)
    assert header == expected or header.startswith(expected + ":"), header


def test_a_mixed_pair_is_refused_by_the_verifier(verifier: GatewayVerifier) -> None:
    # Where one space holds both languages (CACHEGATE_EMBEDDER=e5), the pair would meet:
    # the verifier refuses it whatever the score, an answer in the other language.
    (verdict,) = verifier.model.verdicts(PASSWORD_ES, ["How do I change my password?"])
    assert (verdict.score, verdict.supported, verdict.reason) == (0.0, False, "language_mismatch")
    (same,) = verifier.model.verdicts(PASSWORD_ES, ["¿Cómo puedo cambiar mi contraseña?"])
    assert same.supported and same.path == "zh" and same.score > verifier.shipped_cut(0.01)
    (english,) = verifier.model.verdicts("How do I reset my password?", ["How can I reset it?"])
    assert english.supported and english.path == "en"


def test_under_minilm_they_are_neither_served_nor_stored(
    up: Upstream,
    embedder: Embedder,
    verifier: GatewayVerifier,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    with verified_gateway(tmp_path_factory.mktemp("foreign-minilm"), up, embedder, verifier) as g:
        _tenant, key = g.tenant("minilm", TenantPolicy(**OPEN))
        first = ask(g, key, PASSWORD_ES)
        assert first.headers["x-cachegate-semantic"] == "miss:unsupported_text"
        assert first.headers["x-cachegate-backfill"] == "skipped:unsupported_text"
        again = ask(g, key, PASSWORD_ES)
        assert again.headers["x-cachegate-semantic"] == "miss:unsupported_text"
        # positive control: an English question in the same tenant is stored and served
        assert ask(g, key, "How do I change my password?").headers["x-cachegate-backfill"] == (
            "stored"
        )
        hit = ask(g, key, "How do I change my password?")
        assert hit.headers["x-cachegate-semantic"] == "hit"


def test_languages_are_remembered_per_tenant(verifier: GatewayVerifier) -> None:
    """As verdicts are: reading a question again costs a few µs, and how fast it is read
    must not tell one tenant that another asked it."""
    model = verifier.model
    question = "¿Cuándo abren la tienda el domingo?"
    model.verdicts(question, ["¿A qué hora abre la tienda el domingo?"], scope="tenant-a")
    assert model._languages.get(("tenant-a", question), count_miss=False) == (frozenset({"es"}),)
    assert model._languages.get(("tenant-b", question), count_miss=False) is None
    model.verdicts(question, ["How do I reset my PIN?"], scope="tenant-b")
    assert model._languages.get(("tenant-b", question), count_miss=False) is not None
    english = model._languages.get(("tenant-b", "How do I reset my PIN?"), count_miss=False)
    assert english == (None,)  # English: remembered as such, not as a miss


def test_explain_names_a_refusal_for_two_languages(
    up: Upstream, verifier: GatewayVerifier, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Under ``e5`` one space holds both languages: with a low retrieval threshold the
    English question finds the Spanish entry, and explain says why the verifier refused
    it at score 0; a Spanish paraphrase it read has no such reason (positive control)."""
    e5 = E5Embedder(progress=False)
    with verified_gateway(tmp_path_factory.mktemp("foreign-e5"), up, e5, verifier) as g:
        tenant, key = g.tenant("explain", TenantPolicy(**(OPEN | {"retrieval_threshold": 0.5})))
        assert ask(g, key, PASSWORD_ES).headers["x-cachegate-backfill"] == "stored"
        with admin(g) as client:
            # the body a request sends, so explain looks in the partition the answer is in
            mixed = explain(
                client, tenant, body=chat_body(rec.MODEL, "How do I change my password?")
            )
            same = explain(
                client, tenant, body=chat_body(rec.MODEL, "¿Cómo puedo cambiar mi contraseña?")
            )
        # explain's dry runs count nothing; the same questions asked for real are
        # counted: the English one as a verifier_refused miss it could not read
        assert unread(g, tenant) == 0
        miss = ask(g, key, "How do I change my password?")
        assert miss.headers["x-cachegate-semantic"] == "miss:verifier_refused"
        assert unread(g, tenant) == 1
        paraphrase = ask(g, key, "¿Cómo puedo cambiar mi contraseña?")
        assert paraphrase.headers["x-cachegate-semantic"] == "hit"
        assert unread(g, tenant) == 1  # positive control: a pair it read is not counted
        assert metric(g.metrics(), "cachegate_semantic_misses_total", tenant=tenant) == 2
    (candidate,) = mixed["candidates"]
    assert candidate["question"] == PASSWORD_ES and candidate["above_threshold"]
    assert candidate["verifier_score"] == 0.0
    assert candidate["verifier_unread"] == "language_mismatch"
    assert mixed["decision"] == "miss"
    (read,) = same["candidates"]
    assert read["verifier_unread"] is None and read["verifier_score"] > 0.5
    assert same["decision"] == "hit"


def unread(g: Gateway, tenant: str) -> float:
    return metric(
        g.metrics(), "cachegate_verifier_unread_total", tenant=tenant, reason="language_mismatch"
    )


def explain(client: httpx.Client, tenant: str, **req: Any) -> dict[str, Any]:
    r = client.post(f"/tenants/{tenant}/cache/explain", json=req)
    assert r.status_code == 200, r.text
    return dict(r.json())
