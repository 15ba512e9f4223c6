"""The threads that prepare requests for the engine (tokenizing, building sequences).

Not the event loop's default pool: a host application runs its blocking calls there
(a gateway's database calls, for one), and when those hang (a stalled database) every
thread of that pool can be held, so a request that needs no database at all would
wait for the tokenizer behind them. These threads do CPU work only and never wait on
anything outside the process, so a small pool is never held for long.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

T = TypeVar("T")

PREP_THREADS = 4
_POOL = ThreadPoolExecutor(max_workers=PREP_THREADS, thread_name_prefix="engine-prep")


async def in_prep_thread(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` on a prep thread, with the caller's context (as ``to_thread``)."""
    context = contextvars.copy_context()
    return await asyncio.get_running_loop().run_in_executor(_POOL, partial(context.run, fn, *args))
