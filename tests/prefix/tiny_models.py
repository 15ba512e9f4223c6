"""Tiny randomly initialised HF causal LMs (Llama, Qwen2, Mistral variants) for fast tests.

Weights are widened so logits are O(1) and a 1e-4 tolerance means something.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import transformers
from packaging.version import Version

VOCAB = 128
TF5 = Version(transformers.__version__) >= Version("5.0")
BASE: dict[str, Any] = dict(
    vocab_size=VOCAB,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=256,
    rms_norm_eps=1e-5,
)


def rope(theta: float, **scaling: Any) -> dict[str, Any]:
    """RoPE settings in the spelling of the installed transformers."""
    if TF5:
        return {"rope_parameters": {"rope_theta": theta, "rope_type": "default", **scaling}}
    return {"rope_theta": theta, "rope_scaling": scaling or None}


def hf_config(variant: str) -> Any:
    if variant == "llama":
        return transformers.LlamaConfig(**BASE, **rope(10000.0))
    if variant == "llama_tied":
        return transformers.LlamaConfig(**BASE, **rope(500.0), tie_word_embeddings=True)
    if variant == "llama3_rope":
        return transformers.LlamaConfig(
            **BASE,
            **rope(
                10000.0,
                rope_type="llama3",
                factor=8.0,
                low_freq_factor=1.0,
                high_freq_factor=4.0,
                original_max_position_embeddings=64,
            ),
        )
    if variant == "linear_rope":
        return transformers.LlamaConfig(**BASE, **rope(10000.0, rope_type="linear", factor=4.0))
    if variant == "qwen2":  # q/k/v biases, no o_proj bias
        return transformers.Qwen2Config(**BASE, **rope(1000000.0))
    if variant == "mistral_window":  # sliding window smaller than the prompts
        return transformers.MistralConfig(**BASE, **rope(10000.0), sliding_window=6)
    # head dim 64 and three query heads per KV head, the shape of SmolLM2's attention
    # (the native flash kernel is built for head dims 64 and 128)
    wide = {**BASE, "hidden_size": 192, "num_attention_heads": 3, "num_key_value_heads": 1}
    if variant == "llama_d64":
        return transformers.LlamaConfig(**wide, **rope(10000.0))
    if variant == "mistral_window_d64":
        return transformers.MistralConfig(**wide, **rope(10000.0), sliding_window=40)
    raise ValueError(variant)


VARIANTS = ["llama", "llama_tied", "llama3_rope", "linear_rope", "qwen2", "mistral_window"]


def save_tiny_tokenizer(directory: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2} | {f"t{i}": i for i in range(3, VOCAB)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>"
    )
    fast.save_pretrained(directory)


def save_tiny_model(directory: Path, variant: str) -> None:
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(hf_config(variant))
    with torch.no_grad():
        # HF zero-inits biases and uses std 0.02: widen so every weight (and bias)
        # matters and logits are O(1), which makes a 1e-4 tolerance meaningful
        for name, p in model.named_parameters():
            if "norm" in name:
                p.uniform_(0.5, 1.5)
            else:
                p.normal_(0.0, 0.15)
    model.save_pretrained(directory)
    save_tiny_tokenizer(directory)
