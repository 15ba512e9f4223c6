"""A question the embedder cannot represent is never served from, nor stored in, the
cache (issue 12): under MiniLM unrelated Chinese questions are all [UNK]s and collide
(0.933); under the multilingual e5 they are represented and a paraphrase hits."""

from __future__ import annotations

from pathlib import Path

import pytest

from migrations.runner import upgrade_database
from semantic import DEFAULT_POLICY, EntryStore, SemanticCache
from semantic.embedder import Embedder
from semantic.embedder_e5 import E5Embedder
from semantic.results import UNSUPPORTED_TEXT
from tests.semantic.helpers import chat, reply

OPENING_HOURS = "你们几点开门几点关门"
INVOICE = "如何开具发票"
PASSWORD = "怎么修改登录密码"
PASSWORD_PARAPHRASE = "如何更改我的登录密码"


def fresh(embedder: object, tmp_path: Path) -> SemanticCache:
    url = f"sqlite:///{tmp_path / 'cov.db'}"
    upgrade_database(url)
    return SemanticCache(embedder, EntryStore(url))  # type: ignore[arg-type]


def test_minilm_refuses_chinese_it_cannot_read(embedder: Embedder, tmp_path: Path) -> None:
    cache = fresh(embedder, tmp_path)
    stored = cache.store(chat(OPENING_HOURS), reply("9 to 5"), DEFAULT_POLICY)
    assert not stored.stored and stored.reason == UNSUPPORTED_TEXT
    # A non-empty partition (positive control: an English entry hits) ...
    assert cache.store(chat("What time do you open?"), reply("9 to 5"), DEFAULT_POLICY).stored
    assert cache.lookup(chat("What time do you open?")).hit
    # ... still never serves a question the model sees as unknown tokens.
    result = cache.lookup(chat(INVOICE))
    assert not result.hit and result.reason == UNSUPPORTED_TEXT
    traced = cache.lookup(chat(INVOICE), trace=True)
    assert traced.trace is not None
    assert ("coverage", False) in [(s.check, s.passed) for s in traced.trace.steps]


@pytest.fixture(scope="module")
def e5() -> E5Embedder:
    return E5Embedder(progress=False)


def test_e5_serves_a_chinese_paraphrase_and_not_an_unrelated_question(
    e5: E5Embedder, tmp_path: Path
) -> None:
    cache = fresh(e5, tmp_path)
    assert cache.store(chat(PASSWORD), reply("设置 → 安全 → 修改密码"), DEFAULT_POLICY).stored
    assert cache.store(chat(OPENING_HOURS), reply("早九晚五"), DEFAULT_POLICY).stored
    hit = cache.lookup(chat(PASSWORD_PARAPHRASE))
    assert hit.hit, hit.reason
    assert hit.answer is not None and "修改密码" in str(hit.answer)
    miss = cache.lookup(chat(INVOICE))
    assert not miss.hit and miss.reason != UNSUPPORTED_TEXT


class _CountingCoverage:
    """The real embedder, counting ``coverage`` calls."""

    def __init__(self, inner: Embedder) -> None:
        self.inner, self.calls = inner, 0

    def coverage(self, text: str) -> float:
        self.calls += 1
        return self.inner.coverage(text)

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


def test_coverage_is_remembered_per_tenant_and_question(embedder: Embedder, tmp_path: Path) -> None:
    # Session 11: coverage is a tokenization, a tenth of a cached hit's CPU, so its answer
    # is kept like the question vectors: per (tenant, question), never across tenants.
    counting = _CountingCoverage(embedder)
    cache = fresh(counting, tmp_path)
    assert cache.store(chat("What time do you open?"), reply("9 to 5"), DEFAULT_POLICY).stored
    calls = counting.calls
    assert cache.lookup(chat("What time do you open?")).hit
    assert counting.calls == calls  # asked at store time by the same tenant: remembered
    assert not cache.lookup(chat(INVOICE)).hit
    assert not cache.lookup(chat(INVOICE)).hit
    assert counting.calls == calls + 1  # the refusal is remembered too
    cache.lookup(chat("What time do you open?", tenant="someone-else"))
    assert counting.calls == calls + 2  # another tenant's first ask is computed afresh
    cache.embedder = counting  # type: ignore[assignment]  # a new embedder (here: the same, re-set) forgets every answer
    assert cache.lookup(chat("What time do you open?")).hit
    assert counting.calls == calls + 3
