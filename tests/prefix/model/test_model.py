"""The paged model against transformers: full forward, cached-prefix suffix prefill,
shared physical prefix blocks, batched decode, and the real SmolLM2 weights.

Every comparison is against transformers' own forward over the same weights, so a
wrong RoPE position, mask diagonal or block address shows up as a logit mismatch.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
import transformers

from prefix.errors import EngineConfigError, ModelLoadError
from prefix.model.config import ModelConfig
from prefix.model.kv_cache import PagedKVCache
from prefix.model.llama import ForwardBatch, LlamaModel, SeqChunk
from prefix.model.loader import (
    LoadedModel,
    hf_reference_from,
    load_hf_reference,
    load_model,
    weights_digest,
)
from tests.prefix.tiny_models import BASE, VARIANTS, VOCAB, save_tiny_model

ATOL = 1e-4
BLOCK = 4


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """variant -> (LoadedModel, transformers reference), built once per module."""
    built: dict[str, tuple[LoadedModel, Any]] = {}
    root = tmp_path_factory.mktemp("tiny")

    def get(variant: str) -> tuple[LoadedModel, Any]:
        if variant not in built:
            directory = root / variant
            save_tiny_model(directory, variant)
            loaded = load_model(
                str(directory), device="cpu", verbose=False, cache_dir=root / "cache"
            )
            built[variant] = (loaded, load_hf_reference(str(directory)))
        return built[variant]

    return get


def random_tokens(n: int, seed: int) -> list[int]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(3, VOCAB, (n,), generator=gen).tolist()


def shuffled_blocks(n: int, num_blocks: int, seed: int) -> list[int]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randperm(num_blocks, generator=gen)[:n].tolist()


def hf_logits(reference: Any, tokens: list[int]) -> torch.Tensor:
    with torch.no_grad():
        return reference(torch.tensor([tokens])).logits[0].float()  # [N, vocab]


def new_cache(loaded: LoadedModel, num_blocks: int = 32, block_size: int = BLOCK) -> PagedKVCache:
    return PagedKVCache.for_model(loaded.config, block_size, num_blocks=num_blocks)


# ----------------------------------------------------------------- full forward


@pytest.mark.parametrize("variant", VARIANTS)
def test_full_forward_matches_transformers_at_every_position(tiny: Any, variant: str) -> None:
    loaded, reference = tiny(variant)
    tokens = random_tokens(21, seed=1)
    table = shuffled_blocks(6, 32, seed=2)
    batch = ForwardBatch.for_prefill(tokens, 0, table, BLOCK, all_logits=True)
    ours = loaded.model(batch, new_cache(loaded))
    expected = hf_logits(reference, tokens)
    assert ours.shape == (21, VOCAB) and ours.dtype == torch.float32
    assert expected.abs().max() > 1.0  # the comparison is not between near-zero logits
    torch.testing.assert_close(ours, expected, atol=ATOL, rtol=0)


def test_model_config_read_from_transformers(tiny: Any) -> None:
    qwen = tiny("qwen2")[0].config
    assert (qwen.model_type, qwen.attention_bias, qwen.o_proj_bias) == ("qwen2", True, False)
    mistral = tiny("mistral_window")[0].config
    assert mistral.sliding_windows == (6, 6)
    llama3 = tiny("llama3_rope")[0].config
    assert llama3.rope_type == "llama3" and llama3.rope_theta == 10000.0
    assert tiny("llama_tied")[0].config.tie_word_embeddings
    positions = {tiny(v)[0].config.position_config() for v in VARIANTS}
    assert len(positions) == len(VARIANTS)  # every rope/window/layout change is visible


@pytest.mark.parametrize(
    "change",
    [{"rms_norm_eps": 1e-6}, {"attention_bias": True}, {"o_proj_bias": True}, {"mlp_bias": True}],
)
def test_settings_outside_the_weights_change_the_fingerprint(tiny: Any, change: dict) -> None:
    # The weight digest covers the weight files only: a config.json edited beside them
    # changes every layer's K/V after the first, so it must change the cache key.
    config = tiny("llama")[0].config
    assert replace(config).position_config() == config.position_config()  # control
    assert replace(config, **change).position_config() != config.position_config()


# ------------------------------------------------------- cached prefix + suffix


def two_step_prefill(
    model: LlamaModel, cache: PagedKVCache, tokens: list[int], table: list[int], hit: int
) -> torch.Tensor:
    """Prefill tokens[:hit] (the "cached" prefix), then only the suffix; last logits."""
    if hit:
        model(ForwardBatch.for_prefill(tokens[:hit], 0, table, BLOCK), cache)
    return model(ForwardBatch.for_prefill(tokens[hit:], hit, table, BLOCK), cache)[-1]


@pytest.mark.parametrize("variant", ["llama", "qwen2", "mistral_window", "llama3_rope"])
@pytest.mark.parametrize("hit", [0, BLOCK, 3 * BLOCK, 7, 20])  # 20 = whole prompt - 1
def test_suffix_prefill_after_cached_prefix_matches_full(tiny: Any, variant: str, hit: int) -> None:
    loaded, reference = tiny(variant)
    tokens = random_tokens(21, seed=3)
    table = shuffled_blocks(6, 32, seed=hit)
    cache = new_cache(loaded)
    last = two_step_prefill(loaded.model, cache, tokens, table, hit)
    torch.testing.assert_close(last, hf_logits(reference, tokens)[-1], atol=ATOL, rtol=0)

    # the K/V the suffix wrote equal a one-shot prefill's, slot for slot
    full_cache = new_cache(loaded)
    loaded.model(ForwardBatch.for_prefill(tokens, 0, table, BLOCK), full_cache)
    for layer in range(loaded.config.num_layers):
        k2, v2 = cache.gather(layer, torch.tensor(table), len(tokens))
        k1, v1 = full_cache.gather(layer, torch.tensor(table), len(tokens))
        torch.testing.assert_close(k2, k1, atol=1e-5, rtol=0)
        torch.testing.assert_close(v2, v1, atol=1e-5, rtol=0)


def test_suffix_really_reads_the_cached_prefix(tiny: Any) -> None:
    """Negative control: corrupting a cached block changes the suffix's logits."""
    loaded, reference = tiny("llama")
    tokens = random_tokens(13, seed=4)
    table = [9, 4, 30, 17]
    cache = new_cache(loaded)
    loaded.model(ForwardBatch.for_prefill(tokens[:8], 0, table, BLOCK), cache)
    cache.kv[:, :, 4] += 0.5  # the second cached block
    last = loaded.model(ForwardBatch.for_prefill(tokens[8:], 8, table, BLOCK), cache)[-1]
    assert (last - hf_logits(reference, tokens)[-1]).abs().max() > 1e-2


def test_sequences_share_physical_prefix_blocks(tiny: Any) -> None:
    loaded, reference = tiny("llama")
    prefix = random_tokens(8, seed=5)  # two full blocks
    a, b, c = random_tokens(5, seed=6), random_tokens(7, seed=7), random_tokens(3, seed=8)
    shared = [21, 3]
    cache = new_cache(loaded)
    loaded.model(ForwardBatch.for_prefill(prefix + a, 0, [*shared, 11, 0], BLOCK), cache)
    before = cache.kv[:, :, shared].clone()
    # B and C reuse the same physical prefix blocks; both suffixes go in ONE forward
    batch = ForwardBatch.from_chunks(
        [SeqChunk(b, 8, [*shared, 7, 30, 2]), SeqChunk(c, 8, [*shared, 14])], BLOCK
    )
    logits = loaded.model(batch, cache)
    assert logits.shape == (2, VOCAB)
    torch.testing.assert_close(logits[0], hf_logits(reference, prefix + b)[-1], atol=ATOL, rtol=0)
    torch.testing.assert_close(logits[1], hf_logits(reference, prefix + c)[-1], atol=ATOL, rtol=0)
    assert torch.equal(cache.kv[:, :, shared], before)  # readers never write shared blocks


# ------------------------------------------------------------------------ decode


@pytest.mark.parametrize("variant", ["llama", "mistral_window"])
def test_batched_decode_equals_decoding_each_alone(tiny: Any, variant: str) -> None:
    loaded, reference = tiny(variant)
    lengths = [3, 9, 14, 6]
    prompts = [random_tokens(n, seed=10 + i) for i, n in enumerate(lengths)]
    next_tokens = random_tokens(len(lengths), seed=20)
    free = shuffled_blocks(32, 32, seed=21)
    tables = []
    for n in lengths:  # room for the prompt plus the decoded token
        need = (n + 1 + BLOCK - 1) // BLOCK
        tables.append(free[:need])
        free = free[need:]
    cache = new_cache(loaded)
    for prompt, table in zip(prompts, tables, strict=True):
        loaded.model(ForwardBatch.for_prefill(prompt, 0, table, BLOCK), cache)

    batch = ForwardBatch.for_decode(next_tokens, lengths, tables, BLOCK)
    assert batch.is_decode
    together = loaded.model(batch, cache)
    assert together.shape == (len(lengths), VOCAB)
    for i in range(len(lengths)):
        alone_batch = ForwardBatch.for_decode([next_tokens[i]], [lengths[i]], [tables[i]], BLOCK)
        alone = loaded.model(alone_batch, cache)[0]  # rewrites the same slot, same values
        torch.testing.assert_close(together[i], alone, atol=ATOL, rtol=0)
        expected = hf_logits(reference, [*prompts[i], next_tokens[i]])[-1]
        torch.testing.assert_close(together[i], expected, atol=ATOL, rtol=0)


def test_forward_batch_addressing() -> None:
    batch = ForwardBatch.for_prefill([5, 6, 7], start_pos=5, block_table=[9, 2], block_size=4)
    assert batch.positions.tolist() == [5, 6, 7]  # absolute, not renumbered from 0
    assert batch.slot_mapping.tolist() == [2 * 4 + 1, 2 * 4 + 2, 2 * 4 + 3]
    assert (batch.seq_lens, batch.query_lens, batch.logits_indices.tolist()) == ([8], [3], [2])
    with pytest.raises(ValueError, match="cannot hold"):
        ForwardBatch.for_prefill([1, 2], start_pos=7, block_table=[0, 1], block_size=4)


# ------------------------------------------------------------------ ModelConfig


def test_model_config_old_style_rope_and_rejections() -> None:
    cfg = SimpleNamespace(
        model_type="llama",
        hidden_act="silu",
        num_attention_heads=4,
        num_key_value_heads=2,
        num_hidden_layers=2,
        hidden_size=64,
        intermediate_size=128,
        vocab_size=VOCAB,
        rms_norm_eps=1e-5,
        max_position_embeddings=256,
        rope_theta=5000.0,
        rope_scaling={"type": "linear", "factor": 2.0},
    )
    mc = ModelConfig.from_hf_config(cfg)
    assert (mc.rope_theta, mc.rope_type, mc.head_dim) == (5000.0, "linear", 16)
    assert json.loads(mc.position_config())["rope_scaling"] == [
        ["factor", 2.0],
        ["rope_type", "linear"],
    ]
    hash(mc)  # frozen and hashable, usable as a dict key
    cfg.rope_scaling = {"rope_type": "dynamic", "factor": 2.0}
    with pytest.raises(EngineConfigError, match="rope_type"):
        ModelConfig.from_hf_config(cfg)
    cfg.rope_scaling, cfg.num_key_value_heads = None, 3
    with pytest.raises(EngineConfigError, match="multiple"):
        ModelConfig.from_hf_config(cfg)


# ----------------------------------------------------------------------- loader


def test_loader_errors(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="does not exist"):
        load_model(str(tmp_path / "nope"))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ModelLoadError, match="no model found"):
        load_model(str(empty))
    gpt2 = tmp_path / "gpt2"
    transformers.GPT2Config(n_layer=1, n_embd=8, n_head=2).save_pretrained(gpt2)
    with pytest.raises(ModelLoadError, match="unsupported"):
        load_model(str(gpt2))
    no_weights = tmp_path / "no_weights"
    transformers.LlamaConfig(**BASE).save_pretrained(no_weights)
    with pytest.raises(ModelLoadError, match=r"no .*weights"):
        load_model(str(no_weights))
    two = tmp_path / "two_ggufs"
    two.mkdir()
    (two / "a.gguf").write_bytes(b"")
    (two / "b.gguf").write_bytes(b"")
    with pytest.raises(ModelLoadError, match="several"):
        load_model(str(two))
    (tmp_path / "w.txt").write_text("x")
    with pytest.raises(ModelLoadError, match=r"not a \.gguf"):
        load_model(str(tmp_path / "w.txt"))


def test_loaded_metadata_and_digest(tiny: Any, tmp_path: Path) -> None:
    loaded, _ = tiny("llama")
    weights = Path(loaded.path) / "model.safetensors"
    assert loaded.weights_digest == hashlib.sha256(weights.read_bytes()).hexdigest()
    assert loaded.eos_token_ids == {2}
    assert loaded.context_window == 256
    assert loaded.num_params == sum(p.numel() for p in loaded.model.parameters())
    # the sidecar cache returns the same digest without re-reading the file
    cache_dir = tmp_path / "digests"
    assert weights_digest([weights], cache_dir=cache_dir) == loaded.weights_digest
    assert (cache_dir / "weights_digests.json").is_file()
    assert weights_digest([weights], cache_dir=cache_dir) == loaded.weights_digest


def test_other_weights_with_the_same_size_and_mtime_get_their_own_digest(tmp_path: Path) -> None:
    """``cp -p`` / ``rsync -t`` / an image with normalized timestamps: new weights of the
    same size at the same path with the same mtime. The remembered digest must not be
    reused (it was: the fingerprint stayed, and L3 served the old model's blocks)."""
    weights, cache_dir = tmp_path / "model.gguf", tmp_path / "digests"
    weights.write_bytes(b"A" * 4096)
    stamp = weights.stat().st_mtime_ns
    first = weights_digest([weights], cache_dir=cache_dir)
    assert weights_digest([weights], cache_dir=cache_dir) == first  # the control: remembered
    time.sleep(0.01)  # a change time of its own (filesystems tick in ns to 10 ms)
    weights.write_bytes(b"B" * 4096)
    os.utime(weights, ns=(stamp, stamp))  # same path, size and mtime
    assert weights.stat().st_mtime_ns == stamp and weights.stat().st_size == 4096
    assert weights_digest([weights], cache_dir=cache_dir) == hashlib.sha256(b"B" * 4096).hexdigest()


# ---------------------------------------------------------------- real SmolLM2


@pytest.fixture(scope="module")
def smol(smol_loaded: LoadedModel) -> tuple[LoadedModel, Any, list[int]]:
    loaded = smol_loaded
    reference = hf_reference_from(loaded)  # transformers' forward over the same tensors
    messages = [
        {"role": "system", "content": "You are a concise assistant for a bank."},
        {
            "role": "user",
            "content": (
                "How long does a transfer to another bank usually take, and is there a fee "
                "if I send money abroad in euros?"
            ),
        },
    ]
    ids = loaded.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    if not isinstance(ids, list):  # some transformers versions return a BatchEncoding
        ids = ids["input_ids"]
    return loaded, reference, [int(t) for t in ids]


@pytest.mark.slow
def test_smollm2_metadata(smol: tuple[LoadedModel, Any, list[int]]) -> None:
    loaded, _, _ = smol
    cfg = loaded.config
    assert (cfg.num_layers, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim) == (30, 9, 3, 64)
    assert cfg.rope_theta == 100000.0 and cfg.tie_word_embeddings
    assert loaded.model.lm_head.weight is loaded.model.embed_tokens.weight
    assert loaded.eos_token_ids == {2} and loaded.has_chat_template
    assert loaded.context_window == 8192
    assert loaded.model_id == "SmolLM2-135M-Instruct.Q4_1"
    assert len(loaded.weights_digest) == 64


@pytest.mark.slow
def test_smollm2_full_forward_matches_transformers(
    smol: tuple[LoadedModel, Any, list[int]],
) -> None:
    loaded, reference, tokens = smol
    assert len(tokens) >= 40
    table = shuffled_blocks(4, 8, seed=30)
    batch = ForwardBatch.for_prefill(tokens, 0, table, 16, all_logits=True)
    ours = loaded.model(batch, new_cache(loaded, num_blocks=8, block_size=16))
    torch.testing.assert_close(ours, hf_logits(reference, tokens), atol=ATOL, rtol=0)


@pytest.mark.slow
def test_smollm2_suffix_after_two_cached_blocks(smol: tuple[LoadedModel, Any, list[int]]) -> None:
    loaded, reference, tokens = smol
    table = [6, 1, 4, 0]
    cache = new_cache(loaded, num_blocks=8, block_size=16)
    loaded.model(ForwardBatch.for_prefill(tokens[:32], 0, table, 16), cache)
    suffix = ForwardBatch.for_prefill(tokens[32:], 32, table, 16, all_logits=True)
    ours = loaded.model(suffix, cache)  # rows for positions 32..N-1
    torch.testing.assert_close(ours, hf_logits(reference, tokens)[32:], atol=ATOL, rtol=0)

    # then greedy-decode a few tokens through the batched-decode path
    generated = list(tokens)
    for _ in range(4):
        next_id = int(hf_logits(reference, generated)[-1].argmax())
        step = ForwardBatch.for_decode([next_id], [len(generated)], [table], 16)
        generated.append(next_id)
        torch.testing.assert_close(
            loaded.model(step, cache)[0], hf_logits(reference, generated)[-1], atol=ATOL, rtol=0
        )
