"""Index snapshots on disk (semantic/snapshot.py): an exact round trip, and every
kind of unusable snapshot reported with its reason instead of raising."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from semantic.partitioned_index import PartitionedIndex
from semantic.snapshot import (
    CURRENT,
    FAISS_VERSION,
    Position,
    load_snapshot,
    restore_index,
    save_snapshot,
)
from tests.semantic.helpers import unit_vectors

DIM = 32
EMBEDDER = "minilm:32:abc"
AT = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)


def unit(rng: np.random.Generator, n: int) -> np.ndarray:
    return unit_vectors(rng, n, DIM)


@pytest.fixture
def filled() -> tuple[PartitionedIndex, np.ndarray]:
    """Three partitions: an IVF one with tombstones, a flat one, a one-entry one."""
    rng = np.random.default_rng(3)
    index = PartitionedIndex(DIM, approx_threshold=1000)
    big = unit(rng, 4000)
    index.add("big", np.arange(4000), big)
    index.remove("big", range(0, 4000, 7))  # tombstones, under the compaction fraction
    index.add("small", np.arange(10_000, 10_300), unit(rng, 300))
    index.add("one", [20_000], unit(rng, 1))
    big_index = index.get("big")
    assert big_index is not None and big_index.kind == "ivf" and big_index.tombstones > 0
    return index, unit(rng, 200)


def test_round_trip_gives_the_same_search_results(
    tmp_path: Path, filled: tuple[PartitionedIndex, np.ndarray]
) -> None:
    index, queries = filled
    path = save_snapshot(
        tmp_path, index.images(), position=Position(41, AT), embedder_id=EMBEDDER, dim=DIM
    )
    assert (tmp_path / CURRENT).read_text() == path.name
    loaded = load_snapshot(tmp_path, embedder_id=EMBEDDER, dim=DIM)
    assert loaded.ok and loaded.position == Position(41, AT)
    again = PartitionedIndex(DIM, approx_threshold=1000)
    restore_index(again, loaded)
    assert sorted(again.partitions()) == ["big", "one", "small"]
    for key in ("big", "small", "one"):
        before, after = index.get(key), again.get(key)
        assert before is not None and after is not None
        assert (after.kind, after.ids(), after.tombstones) == (
            before.kind,
            before.ids(),
            before.tombstones,
        )
        for q in queries[:50]:
            assert again.search(key, q, 5) == index.search(key, q, 5)
    # Still a working index: adds and removes after the restore.
    again.add("big", [99_999], queries[0])
    assert again.search("big", queries[0], 1)[0][0] == 99_999
    assert again.remove("big", [1]) == 1 and 1 not in (again.get("big") or [])


def test_a_new_snapshot_replaces_the_old_one(
    tmp_path: Path, filled: tuple[PartitionedIndex, np.ndarray]
) -> None:
    index, _ = filled
    first = save_snapshot(
        tmp_path, index.images(), position=Position(1, AT), embedder_id=EMBEDDER, dim=DIM
    )
    index.drop("small")
    second = save_snapshot(
        tmp_path, index.images(), position=Position(2, AT), embedder_id=EMBEDDER, dim=DIM
    )
    assert not first.exists() and second.exists()
    assert [p.name for p in tmp_path.iterdir() if p.is_dir()] == [second.name]
    loaded = load_snapshot(tmp_path, embedder_id=EMBEDDER, dim=DIM)
    assert loaded.position == Position(2, AT)
    assert loaded.images is not None and sorted(loaded.images) == ["big", "one"]


def _saved(tmp_path: Path, index: PartitionedIndex) -> Path:
    return save_snapshot(
        tmp_path,
        index.images(),
        position=Position(7, AT),
        embedder_id=EMBEDDER,
        dim=DIM,
        schema="rev1",
    )


def _largest_part(snap: Path) -> Path:
    return max(snap.glob("part-*.npz"), key=lambda p: p.stat().st_size)


def test_truncated_file_is_reported_corrupt(
    tmp_path: Path, filled: tuple[PartitionedIndex, np.ndarray]
) -> None:
    part = _largest_part(_saved(tmp_path, filled[0]))
    data = part.read_bytes()
    part.write_bytes(data[: len(data) // 2])
    loaded = load_snapshot(tmp_path, embedder_id=EMBEDDER, dim=DIM, schema="rev1")
    assert not loaded.ok and loaded.reason.startswith("corrupt")


def test_flipped_bytes_are_reported_corrupt(
    tmp_path: Path, filled: tuple[PartitionedIndex, np.ndarray]
) -> None:
    part = _largest_part(_saved(tmp_path, filled[0]))
    data = bytearray(part.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 8] = bytes(255 - b for b in data[middle : middle + 8])
    part.write_bytes(bytes(data))
    loaded = load_snapshot(tmp_path, embedder_id=EMBEDDER, dim=DIM, schema="rev1")
    assert not loaded.ok and loaded.reason.startswith("corrupt")


def test_garbage_manifest_and_missing_files_are_reported(
    tmp_path: Path, filled: tuple[PartitionedIndex, np.ndarray]
) -> None:
    snap = _saved(tmp_path, filled[0])
    _largest_part(snap).unlink()
    assert load_snapshot(tmp_path, embedder_id=EMBEDDER, dim=DIM, schema="rev1").reason.startswith(
        "corrupt"
    )
    (snap / "manifest.json").write_text("{not json")
    assert load_snapshot(tmp_path, embedder_id=EMBEDDER, dim=DIM, schema="rev1").reason.startswith(
        "corrupt"
    )


def test_foreign_snapshots_are_refused_with_the_reason(
    tmp_path: Path, filled: tuple[PartitionedIndex, np.ndarray]
) -> None:
    assert load_snapshot(tmp_path, embedder_id=EMBEDDER, dim=DIM).reason == "missing"
    _saved(tmp_path, filled[0])
    ok = load_snapshot(tmp_path, embedder_id=EMBEDDER, dim=DIM, schema="rev1")
    other = load_snapshot(tmp_path, embedder_id="e5:32:def", dim=DIM, schema="rev1")
    schema = load_snapshot(tmp_path, embedder_id=EMBEDDER, dim=DIM, schema="rev2")
    dim = load_snapshot(tmp_path, embedder_id=EMBEDDER, dim=DIM * 2, schema="rev1")
    assert ok.ok
    assert (other.ok, other.reason) == (False, "written with another embedder")
    assert not schema.ok and "schema" in schema.reason
    assert not dim.ok and "dimension" in dim.reason


def test_another_faiss_versions_snapshot_is_refused(
    tmp_path: Path, filled: tuple[PartitionedIndex, np.ndarray]
) -> None:
    """faiss does not promise its serialization across versions: such a snapshot is
    rebuilt, with both versions in the reason (also one from before they were recorded)."""
    snap = _saved(tmp_path, filled[0])
    manifest = json.loads((snap / "manifest.json").read_text())
    assert manifest["faiss"] == FAISS_VERSION
    assert load_snapshot(tmp_path, embedder_id=EMBEDDER, dim=DIM, schema="rev1").ok
    manifest["faiss"] = "1.7.4"
    (snap / "manifest.json").write_text(json.dumps(manifest))
    loaded = load_snapshot(tmp_path, embedder_id=EMBEDDER, dim=DIM, schema="rev1")
    assert (loaded.ok, loaded.reason) == (
        False,
        f"written with faiss 1.7.4, this is faiss {FAISS_VERSION}",
    )
    del manifest["faiss"]
    (snap / "manifest.json").write_text(json.dumps(manifest))
    loaded = load_snapshot(tmp_path, embedder_id=EMBEDDER, dim=DIM, schema="rev1")
    assert not loaded.ok and "unrecorded" in loaded.reason


def test_a_restore_that_fails_leaves_the_index_as_it_was(
    tmp_path: Path, filled: tuple[PartitionedIndex, np.ndarray]
) -> None:
    """One unreadable partition among good ones: nothing of the snapshot is taken."""
    _saved(tmp_path, filled[0])
    loaded = load_snapshot(tmp_path, embedder_id=EMBEDDER, dim=DIM, schema="rev1")
    assert loaded.images is not None
    bad = loaded.images["small"]
    loaded.images["small"] = type(bad)(
        bad.kind,
        bad.faiss_bytes[: len(bad.faiss_bytes) // 2],
        bad.pos_ids,
        bad.live,
        bad.trained_on,
    )
    index = PartitionedIndex(DIM)
    index.add("kept", [1], unit(np.random.default_rng(5), 1))
    with pytest.raises(RuntimeError):
        restore_index(index, loaded)
    assert index.partitions() == ["kept"] and len(index) == 1
