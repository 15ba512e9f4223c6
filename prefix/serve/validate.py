"""The checks a request must pass before it is queued (torch-free).

Kept apart from the engine so engine.py holds how requests run, and this file which
requests can never run at all: each failure is a ``RequestError`` (a 400), raised by
``PrefixEngine.new_sequence`` before anything is allocated.
"""

from __future__ import annotations

from prefix.core.request import EngineRequest
from prefix.errors import EmptyPromptError, KVBudgetExceededError, PromptTooLongError


def check_request(
    req: EngineRequest, *, max_model_len: int, block_size: int, pool_blocks: int
) -> None:
    """Raise the RequestError of a request that can never run on this model and pool."""
    n, params = req.num_prompt_tokens, req.params
    if n == 0:
        raise EmptyPromptError("the prompt is empty (0 tokens after tokenization)")
    if n + params.max_tokens > max_model_len:
        raise PromptTooLongError(
            f"this model's maximum context length is {max_model_len} tokens; the "
            f"request asks for {n + params.max_tokens} ({n} in the prompt, "
            f"{params.max_tokens} to generate)"
        )
    # The whole request, not only the prompt: the engine caps its advertised window at
    # the pool, so a request that fits here always completes alone (preemption makes
    # room) instead of ending "length" early for want of blocks. Counted as the window
    # is (prompt + output), one slot more than is stored: the last token never is.
    needed = -(-(n + params.max_tokens) // block_size)
    if needed > pool_blocks:
        raise KVBudgetExceededError(
            f"the request needs up to {needed} KV blocks of {block_size} tokens ({n} in "
            f"the prompt, {params.max_tokens} to generate) but the pool has only "
            f"{pool_blocks} ({pool_blocks * block_size} tokens)"
        )
    quota = req.kv_block_quota
    if quota is not None:
        total = -(-(n + params.max_tokens) // block_size)
        if total > quota:
            raise KVBudgetExceededError(
                f"the request needs up to {total} KV blocks ({n} prompt + "
                f"{params.max_tokens} new tokens) but its KV block quota is {quota}"
            )
