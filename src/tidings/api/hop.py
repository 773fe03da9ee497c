"""One hop to a worker thread for the hot path: `await in_thread(func, *args)`.

Starlette's `run_in_threadpool` goes through anyio: a capacity limiter, a
cancel scope and its own worker bookkeeping on every call, all on the
event loop's thread, which is what one API process runs out of first
under load. asyncio's executor does the same hop for less than half the
CPU (docs/benchmarks.md, "The HTTP path, profiled"). What anyio promises
is kept: the call sees the caller's context variables, and a caller
cancelled meanwhile still waits for the call to end, so nothing it
started (a create, its pooled connection) outlives the request.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")
# As many as anyio's default limiter lets run at once; the pool's
# connections bound how many do database work anyway.
THREADS = 40

_executor: ThreadPoolExecutor | None = None


def _threads() -> ThreadPoolExecutor:
    # Made on first use, so a process forked by `tidings serve --workers`
    # starts its own threads.
    global _executor
    if _executor is None:
        _executor = ThreadPoolExecutor(THREADS, thread_name_prefix="tidings-api")
    return _executor


async def in_thread(func: Callable[..., T], *args: Any) -> T:
    call = functools.partial(contextvars.copy_context().run, func, *args)
    done = asyncio.get_running_loop().run_in_executor(_threads(), call)
    try:
        return await asyncio.shield(done)
    except asyncio.CancelledError:
        await asyncio.wait([done])
        raise
