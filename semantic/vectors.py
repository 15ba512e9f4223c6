"""Validating vectors and ids before they reach FAISS (which would crash or
silently misbehave on NaN, zero vectors, wrong shapes or negative ids)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from semantic.errors import InvalidVectorError


def check_vectors(vectors: ArrayLike, dim: int) -> NDArray[np.float32]:
    """Return ``vectors`` as a C-contiguous ``(n, dim)`` float32 array of unit vectors.

    Raises :class:`InvalidVectorError` for a wrong shape, NaN/inf or a zero
    vector (which has no direction, so no cosine).
    """
    try:
        arr = np.asarray(vectors, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise InvalidVectorError(f"not a numeric array: {exc}") from exc
    if arr.ndim == 1:
        arr = arr.reshape(1, -1)
    if arr.ndim != 2 or arr.shape[1] != dim:
        raise InvalidVectorError(f"expected vectors of dimension {dim}, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise InvalidVectorError("vector contains NaN or infinity")
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    if (norms < 1e-12).any():
        raise InvalidVectorError("vector has zero norm")
    return np.ascontiguousarray(arr / norms, dtype=np.float32)


def check_ids(ids: ArrayLike, n: int) -> list[int]:
    arr = np.asarray(ids)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1 or arr.shape[0] != n or (n and arr.dtype.kind not in "iu"):
        raise InvalidVectorError(f"expected {n} integer ids, got {arr.shape} {arr.dtype}")
    out = [int(i) for i in arr]
    if any(i < 0 or i >= 2**63 for i in out):
        raise InvalidVectorError("ids must be in [0, 2**63)")  # faiss uses -1 for "none"
    if len(set(out)) != len(out):
        raise InvalidVectorError("duplicate ids in one batch")
    return out
