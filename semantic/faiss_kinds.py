"""How each kind of FAISS index of a partition is made: exact flat, IVF-Flat, HNSW,
or a GPU flat index (see :mod:`semantic.index` for when each is used and why)."""

from __future__ import annotations

import threading
from typing import Any

import faiss
import numpy as np
from numpy.typing import NDArray

#: Lists an IVF search visits. The 1M-entry sweep (bench/semantic_index_sweep.py, 1,024
#: lists, two busy cores): nprobe 8 -> p50 0.95 ms, 16 -> 1.8 ms, both recall@1 1.000 on
#: clustered data; 16 leaves a margin for data less neatly clustered than the synthetic.
DEFAULT_NPROBE = 16
#: An IVF partition is retrained (more lists) once it holds this many times the
#: vectors it was trained on: the list count follows the size, and retraining
#: costs log4(n) rebuilds over a partition's life.
IVF_GROWTH = 4
#: k-means sees at most this many training vectors per list (faiss warns below 39).
_TRAIN_PER_LIST = 40
#: At most this many lists: training 4,096 lists on 1M vectors took 433 s on two busy
#: cores (1,024: 31 s), and it runs inside an add() as the partition grows.
MAX_LISTS = 1024
APPROX_KINDS = ("ivf", "hnsw")


def ivf_lists(n: int) -> int:
    """The IVF list count for ``n`` vectors: ``4 * sqrt(n)``, at most ``n / 39`` (fewer
    training points per list make poor lists) and :data:`MAX_LISTS`."""
    return max(1, min(int(4 * np.sqrt(max(n, 1))), n // 39, MAX_LISTS))


# faiss's bundled type stubs lag its SWIG API.
_faiss: Any = faiss

_gpu_resources: Any = None
_gpu_lock = threading.Lock()


def gpu_available() -> bool:
    """True when this faiss build has GPU support and sees a CUDA device."""
    return hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0


def _gpu_res() -> Any:
    global _gpu_resources
    with _gpu_lock:  # one StandardGpuResources (scratch memory) per process
        if _gpu_resources is None:
            _gpu_resources = faiss.StandardGpuResources()
        return _gpu_resources


def new_faiss_index(
    kind: str,
    dim: int,
    train: NDArray[np.float32] | None,
    *,
    use_gpu: bool,
    nprobe: int,
    hnsw_m: int,
    ef_construction: int,
    ef_search: int,
) -> tuple[str, Any]:
    """The kind actually made (``gpu-flat`` on a GPU) and the empty index. An IVF index
    is trained on ``train``, the vectors it is about to hold."""
    if use_gpu:
        return "gpu-flat", faiss.GpuIndexFlatIP(_gpu_res(), dim)
    if kind == "ivf":
        assert train is not None, "an IVF index is built from the vectors it will hold"
        return kind, _train_ivf(dim, train, nprobe)
    if kind == "hnsw":
        index = faiss.IndexHNSWFlat(dim, hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = ef_construction
        index.hnsw.efSearch = ef_search
        return kind, index
    return "flat", faiss.IndexFlatIP(dim)


def _train_ivf(dim: int, vecs: NDArray[np.float32], nprobe: int) -> Any:
    nlist = ivf_lists(vecs.shape[0])
    quantizer = faiss.IndexFlatIP(dim)
    index = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
    # Positions are sequential, so an array direct map makes reconstruct_n work (rebuilds).
    index.set_direct_map_type(_faiss.DirectMap.Array)
    index.cp.seed = 1234  # the same vectors train the same lists: reproducible recall
    limit = _TRAIN_PER_LIST * nlist
    if vecs.shape[0] > limit:
        step = vecs.shape[0] / limit  # an even sample keeps every region of the partition
        vecs = vecs[(np.arange(limit) * step).astype(np.int64)]
    index.train(vecs)
    index.nprobe = nprobe
    return index
