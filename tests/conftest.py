"""Shared pytest configuration: the gpu marker is skipped when no CUDA device exists;
the postgres and redis markers when their server on 127.0.0.1 does not answer (unless
``CACHEGATE_TEST_SERVICES=required``, as .ci/run sets: then those tests fail)."""

from __future__ import annotations

import hashlib
import os
import socket
from collections.abc import Iterator, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import torch

from prefix.model.loader import LoadedModel, default_model_path, load_model
from semantic.embedder import Embedder
from tests.prefix.tiny_models import save_tiny_model


def pytest_configure(config: pytest.Config) -> None:
    # Registered here rather than in pyproject.toml: the marker belongs to the tests.
    config.addinivalue_line(
        "markers",
        "vllm: needs a real vLLM server; runs only with CACHEGATE_TEST_VLLM_URL set "
        "(tests/gateway/proxy/test_vllm_live.py)",
    )


SERVICES = {"postgres": 5432, "redis": 6379}


@cache
def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return True
    except OSError:
        return False


def _skip_absent_services(items: list[pytest.Item]) -> None:
    if os.environ.get("CACHEGATE_TEST_SERVICES") == "required":
        return
    for item in items:
        for marker, port in SERVICES.items():
            if marker in item.keywords and not _answers(port):
                reason = f"{marker} on 127.0.0.1:{port} does not answer (.ci/services)"
                item.add_marker(pytest.mark.skip(reason=reason))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _skip_absent_services(items)
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except ImportError:  # pragma: no cover - torch is a hard dependency
        has_cuda = False
    if has_cuda:
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


def _weights_digest(module: torch.nn.Module) -> str:
    """Every tensor of ``module`` (names, shapes, dtypes, bytes), as one digest."""
    digest = hashlib.blake2b(digest_size=16)
    for name, tensor in module.state_dict().items():
        flat = tensor.detach().cpu().contiguous().reshape(-1)  # (numel,)
        digest.update(f"{name}:{tuple(tensor.shape)}:{tensor.dtype};".encode())
        digest.update(flat.view(torch.uint8).numpy().tobytes())  # any dtype, as bytes
    return digest.hexdigest()


@pytest.fixture(scope="session", autouse=True)
def one_onnx_graph_per_weights() -> Iterator[None]:
    """The verifier's ONNX graphs exported (and int8-quantized) once per weights and
    arguments in a test run, not once per test that loads a verifier: 2-10 s each
    on 2 cores, some eighty times. Each load still opens its own session and checks
    it against torch on its probes (validators/onnx_forward.py ``build``), so a test
    that breaks the check or the session still sees that; the export itself is tested
    by the first load of each weights, and runs afresh while a test has replaced the
    exporter or the quantizer (to break or to record them)."""
    from validators import onnx_forward

    real = onnx_forward.export_graph
    tools = (onnx_forward.quantize_int8, torch.onnx.export)
    graphs: dict[tuple[Any, ...], bytes] = {}

    def export_once(
        module: torch.nn.Module,
        input_names: Sequence[str],
        traced_on: tuple[torch.Tensor, ...],
        int8: bool,
    ) -> bytes:
        if (onnx_forward.quantize_int8, torch.onnx.export) != tools:
            return real(module, input_names, traced_on, int8)
        shapes = tuple((tuple(t.shape), str(t.dtype)) for t in traced_on)
        key = (type(module).__qualname__, _weights_digest(module), tuple(input_names), shapes, int8)
        if key not in graphs:
            graphs[key] = real(module, input_names, traced_on, int8)
        return graphs[key]

    onnx_forward.export_graph = export_once
    try:
        yield
    finally:
        onnx_forward.export_graph = real


@pytest.fixture(scope="session")
def smol_loaded() -> LoadedModel:
    """The bundled SmolLM2-135M-Instruct (fp32, CPU); ~15 s to load."""
    return load_model(default_model_path(), device="cpu", verbose=False)


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory: pytest.TempPathFactory) -> LoadedModel:
    """A 2-layer random Llama (vocab 128) with a word-level tokenizer ("t5 t9 ...")."""
    directory: Path = tmp_path_factory.mktemp("tiny-llama")
    save_tiny_model(directory, "llama")
    return load_model(str(directory), device="cpu", verbose=False, cache_dir=directory / "cache")


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The bundled all-MiniLM-L6-v2, loaded once per session (about 3 s on CPU)."""
    return Embedder(progress=False)
