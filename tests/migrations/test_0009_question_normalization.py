"""Migration 0009 recomputes every entry's normalized question and digest, so a row
written under the old normalization keeps matching its own question, and a question
the old one folded into another ("x²" and "x2") no longer overwrites it."""

from __future__ import annotations

import hashlib
import importlib.util
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from alembic import command
from sqlalchemy import create_engine, insert, select

from migrations.runner import alembic_config, migrations_dir, upgrade_database
from semantic.question import normalize_question, question_digest

QUESTIONS = ["What is x²?", "What is x2?", "How much is 20!", "Was ist das Maße?", "Reset my PIN?"]


def migration() -> ModuleType:
    path = migrations_dir() / "versions" / "0009_question_normalization.py"
    spec = importlib.util.spec_from_file_location("m0009", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_frozen_normalization_is_the_live_one() -> None:
    m = migration()
    for q in [*QUESTIONS, "ＡＢＣ ﬁle？", "52!?", "hello!!", "???", "2³ plus ¼", "中文？ "]:
        assert m.new_normalize(q) == normalize_question(q), q
    # ... and the old one folded what the new one keeps (positive control)
    assert m.old_normalize("What is x²?") == m.old_normalize("What is x2?")
    assert normalize_question("What is x²?") != normalize_question("What is x2?")


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_rows_are_renormalized_both_ways(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    from semantic.models import SemanticEntry
    from semantic.store import EntryStore, NewEntry

    m = migration()
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'old.db'}"
    else:
        url = str(request.getfixturevalue("pg_bare_url"))
    upgrade_database(url, "0008")
    now = datetime(2026, 1, 1, tzinfo=UTC)
    engine = create_engine(url)
    # Rows as the old code wrote them; "x²" and "x2" were one key, so one row each of
    # the others plus "x²" (the later write had overwritten "x2").
    with engine.begin() as conn:
        for q in [QUESTIONS[0], *QUESTIONS[2:]]:
            norm = m.old_normalize(q)
            conn.execute(
                insert(SemanticEntry),
                {
                    "partition_key": "p" * 64,
                    "tenant": "acme",
                    "question": q,
                    "normalized_question": norm,
                    "question_digest": hashlib.sha256(norm.encode()).hexdigest(),
                    "answer": {"q": q},
                    "embedding": b"\0" * 16,
                    "embedder_id": "e",
                    "created_at": now,
                    "updated_at": now,
                },
            )
    engine.dispose()
    upgrade_database(url)
    store = EntryStore(url)
    try:
        with store.engine.connect() as conn:
            rows = conn.execute(
                select(
                    SemanticEntry.question,
                    SemanticEntry.normalized_question,
                    SemanticEntry.question_digest,
                )
            ).all()
        for question, norm, digest in rows:
            assert norm == normalize_question(question)
            assert digest == question_digest(norm)
        # "x2" is now its own entry: storing it leaves "x²"'s answer alone.
        new = NewEntry("p" * 64, "acme", QUESTIONS[1], {"q": "x2"}, np.ones(4, "f4"), "e")
        store.upsert(new, now=now)
        again = NewEntry("p" * 64, "acme", "what is x² ", {"q": "x²'"}, np.ones(4, "f4"), "e")
        store.upsert(again, now=now)  # positive control: the same question is one entry
        with store.engine.connect() as conn:
            answers: dict[str, object] = dict(
                conn.execute(select(SemanticEntry.question, SemanticEntry.answer)).all()
            )
        assert len(answers) == len(QUESTIONS)
        assert answers["What is x2?"] == {"q": "x2"} and answers["what is x² "] == {"q": "x²'"}
    finally:
        store.close()
    command.downgrade(alembic_config(url), "0008")
    engine = create_engine(url)
    with engine.connect() as conn:
        after = conn.execute(select(SemanticEntry.question, SemanticEntry.question_digest)).all()
    engine.dispose()
    digests = [d for _, d in after]
    assert len(set(digests)) == len(digests)  # unique still: a colliding row kept its key
    old = {q: hashlib.sha256(m.old_normalize(q).encode()).hexdigest() for q, _ in after}
    assert sum(old[q] == d for q, d in after) == len(after) - 1  # "x2" collides with "x²"
