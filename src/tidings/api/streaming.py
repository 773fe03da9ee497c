"""A streamed request body, read line by line, never waiting on a client
for long.

`chunks` receives the body on the event loop with two timeouts: the
longest pause between two chunks (`idle`) and the longest total wait for
the client (`deadline`); either answers 408 REQUEST_TIMEOUT. Time spent
processing what arrived does not count: only what the client owes.
`lines` splits the chunks into lines, holding at most one chunk and one
unfinished line whatever the body's size.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
from starlette.requests import ClientDisconnect, Request

from tidings.api.problems import ApiError, RequestTimeout
from tidings.domain.errors import InvalidLine


async def chunks(request: Request, idle: float, deadline: float) -> AsyncIterator[bytes]:
    """The body's chunks as they arrive; 408 if the client stalls or dawdles."""
    received = request.stream().__aiter__()
    waited = 0.0
    while True:
        wait = min(idle, deadline - waited)
        if wait <= 0:
            raise RequestTimeout(f"the body took longer than {deadline:g} s to arrive")
        started = anyio.current_time()
        chunk, ended = None, False
        # Never yield inside the cancel scope: its deadline would then fall
        # on whatever the consumer is doing with the chunk.
        with anyio.move_on_after(wait):
            try:
                chunk = await received.__anext__()
            except StopAsyncIteration:
                ended = True
            except ClientDisconnect:
                raise ApiError("the client went away before sending the whole body") from None
        if ended:
            return
        if chunk is None:
            if wait < idle:
                raise RequestTimeout(f"the body took longer than {deadline:g} s to arrive")
            raise RequestTimeout(f"no part of the body arrived for {idle:g} s")
        waited += anyio.current_time() - started
        yield chunk


async def lines(body: AsyncIterator[bytes], max_line: int) -> AsyncIterator[tuple[int, bytes]]:
    """(line number, line without its newline), from 1."""
    number, pending = 0, b""
    async for chunk in body:
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for line in complete:
            number += 1
            yield number, _checked(number, line, max_line)
        # A line that never ends must not grow without bound either.
        _checked(number + 1, pending, max_line)
    if pending:
        yield number + 1, pending


def _checked(number: int, line: bytes, max_line: int) -> bytes:
    if len(line) > max_line:
        raise InvalidLine(number, "line", f"longer than {max_line} bytes")
    return line
