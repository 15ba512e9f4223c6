"""Intra-op threads: one OpenMP pool in the process, the engine thread's.

GNU OpenMP (torch's CPU runtime) gives every thread that runs a parallel region its
own pool of worker threads, kept for the life of that thread, and when the pools'
threads outnumber the CPUs it stops spinning between parallel regions: each worker
sleeps after ~100 spins and every later region waits for a futex wake-up. A server
that loads the model in its main thread (a pool there) and then steps it in the
engine thread (a second pool) on a 2-core box is in exactly that case: measured with
8 sequences, the engine thread's worker used a third of a core instead of a whole one
and a decode step took 87 ms in the engine thread against 70 ms for the same loop in
the main thread (README, "One OpenMP pool").

So a serving process reserves the threads for the engine thread: the main thread is
set to one intra-op thread before it does any torch work (model load then runs
single-threaded: it is mostly file reads and dequantization), and the engine thread
takes the count the main thread would have had (or the configured one).
"""

from __future__ import annotations

import torch

_reserved: int | None = None


def reserve_for_engine_thread() -> int:
    """Call in the main thread before any torch work; returns the engine thread's count.

    Idempotent. From here on torch ops in this thread (and threads that inherit its
    setting) run on one intra-op thread, so this thread never starts a pool.
    """
    global _reserved
    if _reserved is None:
        _reserved = torch.get_num_threads()
        torch.set_num_threads(1)
    return _reserved


def engine_thread_count(configured: int | None) -> int | None:
    """The intra-op threads the engine thread should set: the configured count, else
    the reserved one, else None (leave torch's default)."""
    return configured if configured is not None else _reserved
