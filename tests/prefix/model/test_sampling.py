"""The sampler never raises on a valid request: parameters at the edge of their range
and a forward's numerical fault still pick a token (prefix/model/sampling.py)."""

from __future__ import annotations

import pytest
import torch

from prefix.model.sampling import Sampler, SamplingParams


def logits() -> torch.Tensor:
    return torch.tensor([0.5, 3.0, -1.0, 2.9, 0.0])  # token 1 is the top one


@pytest.mark.parametrize("top_p", [1e-300, 5e-324, 1e-46, 1e-9])
def test_a_top_p_below_float32_keeps_the_top_token(top_p: float) -> None:
    sampler = Sampler(SamplingParams(temperature=1.0, top_p=top_p, seed=0))
    assert {sampler.sample(logits()) for _ in range(20)} == {1}


def test_top_p_still_samples_within_its_mass() -> None:
    # Control: a top_p covering the two best tokens draws both, and only them.
    sampler = Sampler(SamplingParams(temperature=1.0, top_p=0.9, seed=0))
    assert {sampler.sample(logits()) for _ in range(200)} == {1, 3}


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_logits_give_the_best_finite_token(bad: float) -> None:
    row = logits()
    row[4] = bad
    sampler = Sampler(SamplingParams(temperature=0.7, seed=0))
    expected = 4 if bad == float("inf") else 1  # +inf is the best; NaN is never chosen
    assert sampler.sample(row) == expected


def test_top_k_draws_only_the_k_best_tokens() -> None:
    flat = torch.zeros(5)  # every token as likely: without top_k all five are drawn
    free = Sampler(SamplingParams(temperature=1.0, seed=0))
    assert {free.sample(flat) for _ in range(200)} == {0, 1, 2, 3, 4}  # the control
    one = Sampler(SamplingParams(temperature=1.0, top_k=1, seed=0))
    assert {one.sample(logits()) for _ in range(50)} == {1}  # top_k 1 is greedy
    two = Sampler(SamplingParams(temperature=2.0, top_k=2, seed=0))
    assert {two.sample(logits()) for _ in range(200)} == {1, 3}


def test_top_k_then_top_p_reads_the_k_tokens_mass() -> None:
    # The best token holds 0.486 of the whole mass and 0.525 of the two best's: a top_p
    # of 0.5 read over the whole vocabulary keeps both (the control), read over the
    # top_k's renormalized mass, as vLLM reads it, the best alone.
    whole = Sampler(SamplingParams(temperature=1.0, top_p=0.5, seed=0))
    assert {whole.sample(logits()) for _ in range(200)} == {1, 3}
    sampler = Sampler(SamplingParams(temperature=1.0, top_k=2, top_p=0.5, seed=0))
    assert {sampler.sample(logits()) for _ in range(200)} == {1}


@pytest.mark.parametrize("bad", [-2, True, 1.5])
def test_a_bad_top_k_is_refused(bad: object) -> None:
    from protocol.errors import InvalidSamplingParamsError

    with pytest.raises(InvalidSamplingParamsError, match="top_k"):
        SamplingParams(top_k=bad)  # type: ignore[arg-type]
