"""``scheduled_at``, the end of a request's queue time (the engine server's trace spans:
prefix/serve/tracing.py), is set for every request, also one whose first step is a
decode: all but its last token cached (the best hits) or a one-token prompt. It was
None there, and the trace showed such requests queued for their whole life (a review,
session 41). Tiny random model."""

from __future__ import annotations

import torch

from prefix.config import EngineConfig
from prefix.core.request import EngineRequest
from prefix.model.loader import LoadedModel
from prefix.model.sampling import SamplingParams
from prefix.serve.engine import PrefixEngine


def run(engine: PrefixEngine, prompt: list[int], request_id: str) -> tuple[int, float | None]:
    params = SamplingParams(max_tokens=2, ignore_eos=True)
    engine.add_request(EngineRequest(tuple(prompt), params, namespace="t", request_id=request_id))
    last = None
    while engine.has_unfinished():
        for out in engine.step():
            last = out
    assert last is not None and last.arrival_at is not None
    return last.cached_tokens, last.scheduled_at


def test_every_request_leaves_the_queue_at_its_first_step(tiny_llama: LoadedModel) -> None:
    engine = PrefixEngine(EngineConfig(block_size=4, num_blocks=64), loaded=tiny_llama)
    prompt = torch.randint(3, 128, (13,), generator=torch.Generator().manual_seed(1)).tolist()
    cold = run(engine, prompt, "cold")  # the control: a prefill chunk
    assert cold[0] == 0 and cold[1] is not None
    hit = run(engine, prompt, "hit")  # 12 of 13 cached: one token, planned as a decode
    assert hit[0] == 12 and hit[1] is not None
    one = run(engine, [5], "one-token")
    assert one[1] is not None
