"""Lines of a streamed body, and the timeouts on a client sending it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest
from starlette.requests import Request
from starlette.types import Message

from tidings.api.problems import RequestTimeout
from tidings.api.streaming import chunks, lines
from tidings.domain.errors import InvalidLine


async def _given(parts: list[bytes]) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


def read(parts: list[bytes], max_line: int = 100) -> list[tuple[int, bytes]]:
    async def main() -> list[tuple[int, bytes]]:
        return [item async for item in lines(_given(parts), max_line)]

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


def received(pauses: list[float], idle: float, deadline: float) -> list[bytes]:
    """Chunks a client sends after each pause (seconds), as `chunks` reads them."""

    async def main() -> list[bytes]:
        async def receive() -> Message:
            await anyio.sleep(pauses.pop(0))
            return {"type": "http.request", "body": b"x", "more_body": bool(pauses)}

        request = Request({"type": "http", "method": "POST", "headers": []}, receive)
        return [chunk async for chunk in chunks(request, idle, deadline)]

    return anyio.run(main)


def test_a_prompt_body_is_read_whole() -> None:
    assert received([0, 0.01, 0], idle=1, deadline=2) == [b"x", b"x", b"x", b""]


def test_a_client_pausing_longer_than_the_idle_timeout_is_cut_off() -> None:
    with pytest.raises(RequestTimeout, match="no part of the body arrived"):
        received([0, 0.3], idle=0.1, deadline=5)


def test_a_client_trickling_past_the_deadline_is_cut_off() -> None:
    with pytest.raises(RequestTimeout, match=r"longer than 0\.25 s"):
        received([0.06] * 10, idle=0.1, deadline=0.25)
