"""ASGI middleware: a request size limit and the last-resort error answer."""

from __future__ import annotations

from collections.abc import Mapping

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tidings.api.problems import PayloadTooLarge, from_api_error, internal_error
from tidings.platform.logging import get_logger

log = get_logger(__name__)


class BodyLimit:
    """Refuse bodies over `max_bytes` with 413 before any handler runs.

    The body is read up front and replayed, so a chunked upload without a
    Content-Length is held to the same limit as one that declares it.

    Paths in `streamed` (path -> limit) are the exception: their handlers
    read the body as it arrives, so buffering it here would defeat them.
    Their bytes are counted as the handler receives them instead, and the
    read that crosses the limit raises 413 inside the handler, whose
    transaction then rolls back.
    """

    def __init__(
        self, app: ASGIApp, max_bytes: int, streamed: Mapping[str, int] | None = None
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.streamed = dict(streamed or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.streamed.get(scope.get("path", ""))
        if limit is not None:
            if self._declared(scope) > limit:
                await self._refuse(scope, receive, send, limit)
                return
            await self.app(scope, _counted(receive, limit), send)
            return
        if self._declared(scope) > self.max_bytes:
            await self._refuse(scope, receive, send, self.max_bytes)
            return
        body = await self._read(receive)
        if body is None:
            await self._refuse(scope, receive, send, self.max_bytes)
            return
        await self.app(scope, _replay(body, receive), send)

    def _declared(self, scope: Scope) -> int:
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    return int(value)
                except ValueError:
                    return 0
        return 0

    async def _read(self, receive: Receive) -> bytes | None:
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        await from_api_error(_too_large(limit))(scope, receive, send)


def _too_large(limit: int) -> PayloadTooLarge:
    return PayloadTooLarge(f"the request body is larger than {limit} bytes")


def _counted(receive: Receive, limit: int) -> Receive:
    seen = 0

    async def counted() -> Message:
        nonlocal seen
        message = await receive()
        seen += len(message.get("body", b""))
        if seen > limit:
            raise _too_large(limit)
        return message

    return counted


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # later calls wait for the disconnect, as usual

    return replay


class CatchAll:
    """Answer 500 INTERNAL for any exception no handler claimed.

    Starlette's own error middleware would re-raise after answering; this
    one swallows it once it is logged, and sends nothing of its text.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watch(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except Exception:
            log.exception("unhandled error", path=scope.get("path"), method=scope.get("method"))
            if started:
                raise  # too late for a clean answer; let the server drop it
            await internal_error()(scope, receive, send)
