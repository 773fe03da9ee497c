"""A streamed request body, read line by line by a synchronous handler.

Handlers are synchronous: they run in the thread pool and use the psycopg
pool's blocking connections. The body arrives on the event loop, so `lines`
pulls one received chunk at a time across that boundary; the handler holds
at most one chunk and one unfinished line, whatever the body's size.
"""

from __future__ import annotations

from collections.abc import Iterator

from anyio import from_thread
from starlette.requests import Request

from tidings.domain.errors import InvalidLine


def lines(request: Request, max_line: int) -> Iterator[tuple[int, bytes]]:
    """(line number, line without its newline), from 1; call from a worker thread."""
    chunks = request.stream().__aiter__()

    async def next_chunk() -> bytes | None:
        try:
            return await chunks.__anext__()
        except StopAsyncIteration:
            return None

    number, pending = 0, b""
    while (chunk := from_thread.run(next_chunk)) is not None:
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
