"""The per-backfill bound check at scale: the triggers' counts against the GROUP BY.

Every backfill checks its tenant's ``max_semantic_entries`` / ``max_semantic_partitions``
under the cache's write lock, which every tenant's backfills share
(gateway/proxy/semantic_limits.py). Until session 42 that was a GROUP BY over the
tenant's entries (``EntryStore.partition_sizes``); since migration 0015 it reads the
partition counts triggers keep (``EntryStore.tenant_size``). This fills one tenant with
N entries over P partitions (plain SQL, the triggers running as for any insert) and
times both reads, best of R, on SQLite and, where it answers, PostgreSQL; then what the
triggers add to a backfill's write (upserts with them against the schema before them).

    .venv/bin/python bench/semantic_bound_check.py            # 10k and 100k entries
    .venv/bin/python bench/semantic_bound_check.py --sizes 1000 --repeats 3

Writes bench/results/semantic_bound_check.json.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from alembic import command
from sqlalchemy import create_engine, text

from migrations.runner import alembic_config, upgrade_database
from semantic.entries import NewEntry
from semantic.store import EntryStore

PG = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
OUT = Path(__file__).parent / "results" / "semantic_bound_check.json"
FILL = (
    "INSERT INTO semantic_entries (partition_key, tenant, question, normalized_question,"
    " question_digest, answer, embedding, embedder_id, created_at, updated_at, hit_count)"
    " VALUES (:p, 'big', :q, :q2, :q3, '{}', :e, 'emb', :at, :at, 0)"
)


def best_ms(call: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return min(times)


def measure(url: str, sizes: list[int], partitions: int, repeats: int) -> list[dict[str, Any]]:
    upgrade_database(url)
    engine, store, held, rows = create_engine(url), EntryStore(url), 0, []
    for size in sizes:
        values = [
            {"p": f"p{i % partitions}", "q": f"q{i}", "q2": f"q{i}", "q3": f"q{i}"}
            | {"e": b"\0" * 1536, "at": "2026-12-06"}
            for i in range(held, size)
        ]
        with engine.begin() as conn:
            for start in range(0, len(values), 5000):
                conn.execute(text(FILL), values[start : start + 5000])
        held = size
        if url.startswith("postgresql"):
            with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.execute(text("VACUUM ANALYZE semantic_entries"))
                conn.execute(text("VACUUM ANALYZE semantic_partition_sizes"))
        grouped = best_ms(lambda: store.partition_sizes("big"), repeats)
        counts = best_ms(lambda: store.tenant_size("big", "p0"), repeats)
        assert store.tenant_size("big", "p0").entries == size
        row = {"entries": size, "partitions": partitions, "group_by_ms": round(grouped, 2)}
        row |= {"counts_ms": round(counts, 3), "speedup": round(grouped / counts, 1)}
        said = f"GROUP BY {grouped:7.2f} ms, counts {counts:6.3f} ms"
        print(f"  {size:>7} entries: {said}", flush=True)
        rows.append(row)
    rows.append(write_cost(url, store, repeats))
    engine.dispose()
    store.close()
    return rows


def write_cost(url: str, store: EntryStore, repeats: int, n: int = 300) -> dict[str, Any]:
    """What the triggers add to a backfill's write: ``n`` upserts of new questions with
    them, then with the schema of before them (migration 0014), best of ``repeats``."""
    vector = np.ones(384, dtype=np.float32) / np.sqrt(384)

    def upserts(tag: str) -> float:
        started = time.perf_counter()
        for i in range(n):
            entry = NewEntry("w", "writer", f"{tag} {i}", {}, vector, "emb")
            store.upsert(entry, now=datetime.now(UTC))
        store.delete_where(tenant="writer")
        return (time.perf_counter() - started) * 1000 / n

    with_triggers = min(upserts(f"with {r}") for r in range(repeats))
    command.downgrade(alembic_config(url), "0014")
    without = min(upserts(f"without {r}") for r in range(repeats))
    upgrade_database(url)
    print(f"  an upsert: {with_triggers:.3f} ms with the triggers, {without:.3f} ms without")
    return {
        "upsert_ms_with_triggers": round(with_triggers, 3),
        "upsert_ms_without": round(without, 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--partitions", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    result: dict[str, Any] = {"repeats": args.repeats}
    with tempfile.TemporaryDirectory() as tmp:
        print("SQLite", flush=True)
        url = f"sqlite:///{tmp}/bound.db"
        result["sqlite"] = measure(url, args.sizes, args.partitions, args.repeats)
    try:
        import psycopg

        schema = f"cg_bound_{uuid.uuid4().hex[:8]}"
        dsn = "host=127.0.0.1 port=5432 user=postgres dbname=test"
        with psycopg.connect(dsn, autocommit=True, connect_timeout=3) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
    except Exception as exc:  # no server: SQLite alone
        print(f"PostgreSQL skipped: {exc}")
    else:
        try:
            print("PostgreSQL", flush=True)
            url = f"{PG}?options=-csearch_path%3D{schema}"
            result["postgresql"] = measure(url, args.sizes, args.partitions, args.repeats)
        finally:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
