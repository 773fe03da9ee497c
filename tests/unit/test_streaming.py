"""Lines of a streamed body, as a synchronous handler reads them."""

from __future__ import annotations

import anyio
import pytest
from starlette.requests import Request
from starlette.types import Message

from tidings.api.streaming import lines
from tidings.domain.errors import InvalidLine


def read(chunks: list[bytes], max_line: int = 100) -> list[tuple[int, bytes]]:
    """Run `lines` in a worker thread, the body arriving in `chunks`."""
    messages: list[Message] = [
        {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1}
        for i, c in enumerate(chunks)
    ]

    async def receive() -> Message:
        return messages.pop(0)

    async def main() -> list[tuple[int, bytes]]:
        request = Request({"type": "http", "method": "POST", "headers": []}, receive)
        return await anyio.to_thread.run_sync(lambda: list(lines(request, max_line)))

    return anyio.run(main)


def test_lines_split_across_chunks_are_joined() -> None:
    got = read([b'{"ref"', b': "a"}\n{"ref": "b"}\n\n{"r', b'ef": "c"}'])
    assert got == [(1, b'{"ref": "a"}'), (2, b'{"ref": "b"}'), (3, b""), (4, b'{"ref": "c"}')]


def test_a_trailing_newline_ends_the_last_line() -> None:
    assert read([b"x\n", b"y\n"]) == [(1, b"x"), (2, b"y")]
    assert read([b""]) == []


def test_a_line_over_the_limit_is_refused_before_it_ends() -> None:
    with pytest.raises(InvalidLine) as error:
        read([b"ok\n", b"x" * 60, b"x" * 60], max_line=100)
    assert error.value.line == 2
    with pytest.raises(InvalidLine):
        read([b"y" * 101 + b"\n"], max_line=100)
