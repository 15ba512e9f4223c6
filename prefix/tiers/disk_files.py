"""The disk store's files: their names, and the scan that rebuilds its index at start.

One record a file, ``<directory>/<first two hex digits>/<key hex>.kvb``; a write goes to
a ``.tmp`` file beside it and is renamed into place (prefix/tiers/disk_store.py).
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

SUFFIX = ".kvb"
TMP_SUFFIX = ".tmp"
FILE_RE = re.compile(r"((?:[0-9a-f]{2})+)\.kvb")
GONE = (FileNotFoundError, NotADirectoryError)  # evicted or discarded: a miss, not a failure


def unlink(path: str | Path) -> None:
    with contextlib.suppress(OSError):  # already gone, or not ours to worry about
        os.unlink(path)


def scan(directory: Path) -> list[tuple[bytes, int]]:
    """(key, size) of every record under ``directory``, least recently used first (by
    file time: reads touch it); temp files a crash left are deleted, anything else
    that is not ours is ignored, never deleted."""
    found: list[tuple[float, str, bytes, int]] = []
    with os.scandir(directory) as subdirs:
        for sub in subdirs:
            if not sub.is_dir(follow_symlinks=False):
                continue
            with os.scandir(sub.path) as files:
                for entry in files:
                    if entry.name.endswith(TMP_SUFFIX):
                        unlink(entry.path)
                        continue
                    match = FILE_RE.fullmatch(entry.name)
                    if match is None or match.group(1)[:2] != sub.name:
                        continue  # not ours: ignore, never delete
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except GONE:
                        continue  # evicted by another process meanwhile
                    found.append((st.st_mtime, entry.name, bytes.fromhex(match[1]), st.st_size))
    return [(key, size) for _, _, key, size in sorted(found)]
