"""Restart of the semantic index at 1M entries: snapshot load vs rebuild (issue 15, part 4).

One partition of ``--size`` synthetic clustered unit vectors
(bench/semantic_index_sweep.py's generator) is indexed the way the gateway does it
(``PartitionedIndex``: flat, then IVF once past the threshold), then:

  rebuild         what a start without a snapshot does to the index: train + add
                  (reading the rows back from the database comes on top of this)
  save            ``save_snapshot`` of the index (to ``--dir``, fsynced)
  load            ``load_snapshot`` + ``restore_index`` into an empty index: the
                  part of a snapshot start that grows with the entry count (the
                  log replay after it is proportional to the changes since)

and checks that exact search results are the same before and after.

Writes bench/results/semantic_snapshot_restart.json. Run:
.venv/bin/python bench/semantic_snapshot_restart.py --size 1000000 --dir /tmp/snapshots
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import write_json
from bench.semantic_index_sweep import DIM, clustered
from semantic.partitioned_index import PartitionedIndex
from semantic.snapshot import Position, load_snapshot, restore_index, save_snapshot


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument("--dir", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    load_start = list(os.getloadavg())
    vectors = clustered(args.size + 200, max(1, args.size // 50), 1.0, args.seed)
    queries = vectors[args.size :]
    index = PartitionedIndex(DIM)
    t0 = time.perf_counter()
    for start in range(0, args.size, 100_000):
        stop = min(args.size, start + 100_000)
        index.add("p", np.arange(start, stop), vectors[start:stop])
        print(f"indexed {stop:,} ({time.perf_counter() - t0:.0f}s)", flush=True)
    grow_s = time.perf_counter() - t0
    part = index.get("p")
    assert part is not None
    t0 = time.perf_counter()
    part._rebuild(part.kind)  # one rebuild at full size: what a start without a snapshot does
    rebuild_s = time.perf_counter() - t0
    print(f"rebuild at full size: {rebuild_s:.1f}s ({part.kind})", flush=True)
    before = [index.search("p", q, 5) for q in queries]
    shutil.rmtree(args.dir, ignore_errors=True)
    t0 = time.perf_counter()
    images = index.images()
    save_snapshot(
        args.dir, images, position=Position(1, datetime.now(UTC)), embedder_id="bench", dim=DIM
    )
    save_s = time.perf_counter() - t0
    del images
    print(f"save: {save_s:.1f}s", flush=True)
    size_bytes = sum(p.stat().st_size for p in args.dir.rglob("*") if p.is_file())
    fresh = PartitionedIndex(DIM)
    t0 = time.perf_counter()
    loaded = load_snapshot(args.dir, embedder_id="bench", dim=DIM)
    restore_index(fresh, loaded)
    load_s = time.perf_counter() - t0
    print(f"load + restore: {load_s:.1f}s", flush=True)
    after = [fresh.search("p", q, 5) for q in queries]
    same = sum(a == b for a, b in zip(after, before, strict=True))
    write_json(
        "semantic_snapshot_restart",
        {
            "benchmark": "semantic_snapshot_restart",
            "config": {
                "size": args.size,
                "dim": DIM,
                "kind": part.kind,
                "nprobe": part.nprobe,
                "lists": int(part._index.nlist) if part.kind == "ivf" else None,
            },
            "grow_by_100k_adds_s": round(grow_s, 1),
            "rebuild_at_full_size_s": round(rebuild_s, 1),
            "snapshot_save_s": round(save_s, 1),
            "snapshot_bytes": size_bytes,
            "snapshot_load_and_restore_s": round(load_s, 1),
            "same_top5_after_restore": f"{same}/{len(queries)}",
            "load_average_at_start": load_start,
            "load_average_at_end": list(os.getloadavg()),
        },
    )
    shutil.rmtree(args.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
