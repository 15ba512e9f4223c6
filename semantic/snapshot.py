"""Index snapshots on disk: a restart loads the partitions instead of rebuilding them.

Rebuilding a million entries from the database (read every row, retrain IVF, add)
takes minutes; reading a snapshot takes seconds. A snapshot is a directory

    <dir>/snap-<seq>-<random>/manifest.json     what it is, where it stands in the log
    <dir>/snap-<seq>-<random>/part-00000.npz    one file per partition
    <dir>/CURRENT                               the name of the snapshot in force

written under a temporary name, fsynced, renamed, and only then named in
``CURRENT`` (``os.replace``, atomic), so a crash at any point leaves the previous
snapshot in force, or none: never half of one. Older snapshot directories are
removed after the switch.

The manifest records the change-log position the snapshot reflects
(:class:`Position`: every ``cache_changes`` row up to ``seq`` is in it, or was
written within the replay window after ``at``), the embedder id, the vector
dimension, the snapshot format, the faiss version that serialized the partitions
and a schema tag of the caller's choosing. Loading checks all of them and reports
why a snapshot cannot be used (:class:`Loaded` ``reason``) instead of raising: a
missing, foreign or damaged snapshot means a rebuild from the database, never a
failed start. Partition files are ``.npz`` archives, whose per-member CRC32
``numpy`` checks while reading, so a truncated or bit-flipped file is detected, as
is a manifest that does not match its files. Bytes that pass the CRC but that faiss
cannot read only fail at :func:`restore_index`, which the caller treats the same.

What comes after the snapshot (replaying the log forward from its position,
comparing the result with the database) is the application's part: it owns the
log reader.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import uuid
import zipfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from semantic.index import IndexImage
from semantic.partitioned_index import PartitionedIndex

logger = logging.getLogger(__name__)

#: Bumped whenever the files' layout changes: an older snapshot is then rebuilt.
SNAPSHOT_FORMAT = 1
CURRENT = "CURRENT"
#: The partitions are faiss's own serialization, whose layout faiss does not promise
#: to keep across versions: a snapshot written by another faiss is rebuilt rather
#: than handed to a reader that may fail on it, or misread it.
FAISS_VERSION = str(faiss.__version__)


@dataclass(frozen=True)
class Position:
    """Where a snapshot stands in the change log (``seq``, and ``at``: the database's
    clock when every row up to ``seq`` was applied)."""

    seq: int
    at: datetime
    #: When the log row ``seq`` was written: the row rewritten (a restored database
    #: handing seqs out again) says the snapshot is of another history. None: unknown.
    head_at: datetime | None = None


@dataclass(frozen=True)
class Loaded:
    """A usable snapshot (``images`` and ``position``), or why there is none."""

    images: dict[str, IndexImage] | None
    position: Position | None
    reason: str

    @property
    def ok(self) -> bool:
        return self.images is not None


def save_snapshot(
    directory: Path,
    images: dict[str, IndexImage],
    *,
    position: Position,
    embedder_id: str,
    dim: int,
    schema: str = "",
) -> Path:
    """Write ``images`` (from :meth:`PartitionedIndex.images`) as the snapshot in force."""
    directory.mkdir(parents=True, exist_ok=True)
    name = f"snap-{position.seq}-{uuid.uuid4().hex[:8]}"
    tmp = directory / f".tmp-{name}"
    tmp.mkdir()
    try:
        parts = []
        for i, (key, image) in enumerate(sorted(images.items())):
            file = f"part-{i:05d}.npz"
            with (tmp / file).open("wb") as fh:
                np.savez(
                    fh,
                    faiss=image.faiss_bytes,
                    pos_ids=image.pos_ids,
                    live=image.live,
                )
                fh.flush()
                os.fsync(fh.fileno())
            parts.append(
                {"key": key, "file": file, "kind": image.kind, "trained_on": image.trained_on}
            )
        manifest = {
            "format": SNAPSHOT_FORMAT,
            "embedder_id": embedder_id,
            "dim": dim,
            "schema": schema,
            "faiss": FAISS_VERSION,
            "seq": position.seq,
            "at": position.at.isoformat(),
            "head_at": None if position.head_at is None else position.head_at.isoformat(),
            "partitions": parts,
        }
        _write_synced(tmp / "manifest.json", json.dumps(manifest, indent=1).encode())
        tmp.rename(directory / name)
        _fsync_dir(directory)
        _write_synced(directory / f".{CURRENT}.tmp", name.encode())
        os.replace(directory / f".{CURRENT}.tmp", directory / CURRENT)
        _fsync_dir(directory)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for old in directory.iterdir():
        if old.name != name and old.is_dir() and old.name.startswith(("snap-", ".tmp-snap-")):
            shutil.rmtree(old, ignore_errors=True)
    return directory / name


def load_snapshot(directory: Path, *, embedder_id: str, dim: int, schema: str = "") -> Loaded:
    """The snapshot in force under ``directory``, checked; see :class:`Loaded`."""
    try:
        name = (directory / CURRENT).read_text().strip()
    except FileNotFoundError:
        return Loaded(None, None, "missing")
    except OSError as exc:
        return Loaded(None, None, f"unreadable: {exc}")
    snap = directory / name
    try:
        manifest = json.loads((snap / "manifest.json").read_text())
        problem = _mismatch(manifest, embedder_id=embedder_id, dim=dim, schema=schema)
        if problem:
            return Loaded(None, None, problem)
        head_at = manifest.get("head_at")  # absent in snapshots before session 37
        position = Position(
            int(manifest["seq"]),
            datetime.fromisoformat(manifest["at"]),
            None if head_at is None else datetime.fromisoformat(head_at),
        )
        images = {
            part["key"]: _read_part(snap / part["file"], part) for part in manifest["partitions"]
        }
    except (OSError, ValueError, KeyError, TypeError, zipfile.BadZipFile, EOFError) as exc:
        # A damaged snapshot is only a slower start: say why and rebuild.
        return Loaded(None, None, f"corrupt: {type(exc).__name__}: {str(exc)[:200]}")
    return Loaded(images, position, "ok")


def _mismatch(manifest: dict[str, Any], *, embedder_id: str, dim: int, schema: str) -> str:
    if manifest.get("format") != SNAPSHOT_FORMAT:
        return f"format {manifest.get('format')!r} is not {SNAPSHOT_FORMAT}"
    if manifest.get("embedder_id") != embedder_id:
        return "written with another embedder"
    if manifest.get("dim") != dim:
        return f"dimension {manifest.get('dim')!r} is not {dim}"
    if manifest.get("schema") != schema:
        return f"schema {manifest.get('schema')!r} is not {schema!r}"
    if manifest.get("faiss") != FAISS_VERSION:
        # Absent in snapshots from before the version was recorded: rebuilt once.
        written = manifest.get("faiss")
        by = f"faiss {written}" if written else "an unrecorded faiss version"
        return f"written with {by}, this is faiss {FAISS_VERSION}"
    return ""


def _read_part(path: Path, part: dict[str, Any]) -> IndexImage:
    with np.load(path, allow_pickle=False) as data:
        # Reading each member to its end is what makes zipfile check its CRC.
        return IndexImage(
            str(part["kind"]),
            data["faiss"],
            data["pos_ids"].astype(np.int64, copy=False),
            data["live"],
            int(part["trained_on"]),
        )


def restore_index(index: PartitionedIndex, loaded: Loaded) -> None:
    """Put a loaded snapshot's partitions into ``index``, all or none of them. Raises
    ``ValueError`` when an image does not fit, and whatever faiss raises (``RuntimeError``)
    for bytes it cannot read: the caller rebuilds."""
    if loaded.images is None:
        raise ValueError(f"no usable snapshot: {loaded.reason}")
    index.replace_all(loaded.images)


def _write_synced(path: Path, data: bytes) -> None:
    with path.open("wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
