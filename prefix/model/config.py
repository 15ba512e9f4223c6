"""The model shape and position settings the paged engine needs, frozen.

`ModelConfig` is built from a Hugging Face config (transformers 4.x keeps
`rope_theta` / `rope_scaling`, 5.x keeps a `rope_parameters` dict; both are
read) and is the only thing `model.py` and `kv_cache.py` look at, so the
engine never depends on which transformers version produced the weights.

`position_config()` is part of the prefix cache fingerprint: two models whose
K/V differ for the same tokens (another RoPE base or scaling, another head
layout, a sliding window, a norm epsilon or bias flag that the weight files do not
fix) must never share a cache key.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from prefix.errors import EngineConfigError

SUPPORTED_MODEL_TYPES = frozenset({"llama", "mistral", "qwen2"})
# "dynamic" and "longrope" change inv_freq with the sequence length, so a cached K
# would depend on how long the prompt that wrote it was: not reusable, not supported.
SUPPORTED_ROPE_TYPES = frozenset({"default", "linear", "llama3"})
_REQUIRED_ROPE_KEYS: dict[str, tuple[str, ...]] = {
    "default": (),
    "linear": ("factor",),
    "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"),
}

# Frozen, hashable form of a rope-scaling dict: sorted (key, value) pairs, lists as tuples.
RopeScaling = tuple[tuple[str, Any], ...]


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _freeze(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    return value


@dataclass(frozen=True)
class ModelConfig:
    """Shapes and position settings of a Llama-family decoder."""

    num_layers: int
    hidden_size: int
    intermediate_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    rms_norm_eps: float
    rope_theta: float
    rope_scaling: RopeScaling | None = None  # None means plain RoPE; includes "rope_type"
    max_position_embeddings: int = 2048
    tie_word_embeddings: bool = False
    attention_bias: bool = False  # bias on q/k/v projections
    o_proj_bias: bool = False  # Llama's attention_bias also covers o_proj; Qwen2's does not
    mlp_bias: bool = False
    sliding_windows: tuple[int | None, ...] = ()  # per layer; () means no layer slides
    model_type: str = "llama"

    def __post_init__(self) -> None:
        positive = {
            "num_layers": self.num_layers,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_heads": self.num_heads,
            "num_kv_heads": self.num_kv_heads,
            "head_dim": self.head_dim,
            "vocab_size": self.vocab_size,
            "max_position_embeddings": self.max_position_embeddings,
        }
        for name, value in positive.items():
            if not isinstance(value, int) or value <= 0:
                raise EngineConfigError(f"{name} must be a positive int, got {value!r}")
        if self.num_heads % self.num_kv_heads != 0:
            raise EngineConfigError(
                f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads "
                f"({self.num_kv_heads})"
            )
        if self.head_dim % 2 != 0:
            raise EngineConfigError(f"head_dim must be even for RoPE, got {self.head_dim}")
        if not (self.rms_norm_eps > 0 and math.isfinite(self.rms_norm_eps)):
            raise EngineConfigError(f"rms_norm_eps must be > 0, got {self.rms_norm_eps}")
        if not (self.rope_theta > 0 and math.isfinite(self.rope_theta)):
            raise EngineConfigError(f"rope_theta must be > 0, got {self.rope_theta}")
        if self.model_type not in SUPPORTED_MODEL_TYPES:
            raise EngineConfigError(
                f"unsupported model_type {self.model_type!r}; supported: "
                f"{sorted(SUPPORTED_MODEL_TYPES)}"
            )
        if self.sliding_windows and len(self.sliding_windows) != self.num_layers:
            raise EngineConfigError(
                f"sliding_windows has {len(self.sliding_windows)} entries for "
                f"{self.num_layers} layers"
            )
        for w in self.sliding_windows:
            if w is not None and (not isinstance(w, int) or w <= 0):
                raise EngineConfigError(f"sliding window must be a positive int, got {w!r}")
        self._check_rope()

    def _check_rope(self) -> None:
        scaling = self.rope_scaling_dict()
        if scaling is None:
            return
        rope_type = scaling.get("rope_type", "default")
        if rope_type not in SUPPORTED_ROPE_TYPES:
            raise EngineConfigError(
                f"unsupported rope_type {rope_type!r}; supported: {sorted(SUPPORTED_ROPE_TYPES)}"
            )
        missing = [k for k in _REQUIRED_ROPE_KEYS[rope_type] if scaling.get(k) is None]
        if missing:
            raise EngineConfigError(f"rope_type {rope_type!r} needs {missing}")
        if float(scaling.get("partial_rotary_factor", 1.0)) != 1.0:
            raise EngineConfigError("partial_rotary_factor != 1 is not supported")

    # ------------------------------------------------------------------ derived

    @property
    def rope_type(self) -> str:
        scaling = self.rope_scaling_dict()
        return "default" if scaling is None else str(scaling.get("rope_type", "default"))

    def rope_scaling_dict(self) -> dict[str, Any] | None:
        return None if self.rope_scaling is None else dict(self.rope_scaling)

    def sliding_window(self, layer: int) -> int | None:
        return self.sliding_windows[layer] if self.sliding_windows else None

    def position_config(self) -> str:
        """Canonical JSON of every setting that changes K/V or attention for given tokens."""
        fields: dict[str, Any] = {
            "model_type": self.model_type,
            "num_layers": self.num_layers,
            "num_heads": self.num_heads,
            "num_kv_heads": self.num_kv_heads,
            "head_dim": self.head_dim,
            "rope_theta": float(self.rope_theta),
            "rope_scaling": self.rope_scaling,
            "max_position_embeddings": self.max_position_embeddings,
            "sliding_windows": list(self.sliding_windows),
            # Not in the weights either, yet they change every layer's output and so the
            # K/V of every layer after the first: an edited config.json beside the same
            # weight files must not reuse blocks the old one computed.
            "rms_norm_eps": float(self.rms_norm_eps),
            "attention_bias": self.attention_bias,
            "o_proj_bias": self.o_proj_bias,
            "mlp_bias": self.mlp_bias,
        }
        return json.dumps(fields, sort_keys=True, separators=(",", ":"))

    # ------------------------------------------------------------ construction

    @classmethod
    def from_hf_config(cls, cfg: Any) -> ModelConfig:
        """Read a transformers `PretrainedConfig` (4.x or 5.x layout)."""
        model_type = str(getattr(cfg, "model_type", ""))
        if model_type not in SUPPORTED_MODEL_TYPES:
            raise EngineConfigError(
                f"unsupported model_type {model_type!r}; supported: {sorted(SUPPORTED_MODEL_TYPES)}"
            )
        hidden_act = getattr(cfg, "hidden_act", "silu")
        if hidden_act not in ("silu", "swish"):
            raise EngineConfigError(f"unsupported hidden_act {hidden_act!r}; only silu")
        num_heads = int(cfg.num_attention_heads)
        num_kv_heads = int(getattr(cfg, "num_key_value_heads", None) or num_heads)
        head_dim = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // num_heads)
        num_layers = int(cfg.num_hidden_layers)
        rope_theta, rope_scaling = _read_rope(cfg)
        attention_bias = bool(getattr(cfg, "attention_bias", False))
        qkv_bias, o_bias = {
            "qwen2": (True, False),
            "mistral": (False, False),
        }.get(model_type, (attention_bias, attention_bias))
        return cls(
            num_layers=num_layers,
            hidden_size=int(cfg.hidden_size),
            intermediate_size=int(cfg.intermediate_size),
            num_heads=num_heads,
            num_kv_heads=num_kv_heads,
            head_dim=head_dim,
            vocab_size=int(cfg.vocab_size),
            rms_norm_eps=float(getattr(cfg, "rms_norm_eps", 1e-6)),
            rope_theta=rope_theta,
            rope_scaling=rope_scaling,
            max_position_embeddings=int(getattr(cfg, "max_position_embeddings", 2048)),
            tie_word_embeddings=bool(getattr(cfg, "tie_word_embeddings", False)),
            attention_bias=qkv_bias,
            o_proj_bias=o_bias,
            mlp_bias=bool(getattr(cfg, "mlp_bias", False)),
            sliding_windows=_read_sliding_windows(cfg, model_type, num_layers),
            model_type=model_type,
        )


def _read_rope(cfg: Any) -> tuple[float, RopeScaling | None]:
    params = getattr(cfg, "rope_parameters", None)
    if (
        isinstance(params, Mapping)
        and params
        and all(isinstance(v, Mapping) for v in params.values())
    ):
        raise EngineConfigError("per-layer-type rope_parameters are not supported")
    if isinstance(params, Mapping) and params:
        scaling = dict(params)  # transformers >= 5: theta and scaling in one dict
        theta = scaling.pop("rope_theta", None)
    else:
        scaling = dict(getattr(cfg, "rope_scaling", None) or {})
        theta = None
    if theta is None:
        theta = getattr(cfg, "rope_theta", None) or 10000.0
    if "type" in scaling:  # the pre-"rope_type" spelling
        scaling.setdefault("rope_type", scaling.pop("type"))
    scaling.pop("type", None)
    # plain RoPE is stored as None, however the config spelled it
    extras = {k: v for k, v in scaling.items() if k != "rope_type"}
    if extras.get("partial_rotary_factor", 1.0) == 1.0:
        extras.pop("partial_rotary_factor", None)
    if scaling.get("rope_type", "default") == "default" and not extras:
        return float(theta), None
    return float(theta), _freeze(scaling)


def _read_sliding_windows(cfg: Any, model_type: str, num_layers: int) -> tuple[int | None, ...]:
    window = getattr(cfg, "sliding_window", None)
    if model_type == "llama" or window is None:
        return ()
    if model_type == "qwen2":
        if not getattr(cfg, "use_sliding_window", False):
            return ()
        layer_types = getattr(cfg, "layer_types", None)
        if layer_types is None:
            start = int(getattr(cfg, "max_window_layers", 0))
            layer_types = [
                "sliding_attention" if i >= start else "full_attention" for i in range(num_layers)
            ]
        windows = tuple(int(window) if t == "sliding_attention" else None for t in layer_types)
    else:
        windows = (int(window),) * num_layers
    return windows if any(w is not None for w in windows) else ()
