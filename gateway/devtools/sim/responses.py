"""Responses that do more than answer: reset the connection, stop when the client leaves.

A reset needs the TCP transport, which uvicorn does not put in the ASGI scope: the
server's protocol class (server.py) adds it as a scope extension under TRANSPORT_EXTENSION.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import AsyncGenerator

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from gateway.concurrency.waits import within

TRANSPORT_EXTENSION = "costgate.sim.transport"
JSON = "application/json"


class NoResponse(Response):
    """For a connection already aborted: there is nobody to answer."""

    def __init__(self) -> None:
        # nginx's "client closed request": how the stats count requests nobody got back
        super().__init__(status_code=499)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        return None


def abort_connection(scope: Scope) -> bool:
    """Reset the client's TCP connection (RST, not FIN); False if the server can't."""
    transport = scope.get("extensions", {}).get(TRANSPORT_EXTENSION)
    if transport is None:
        return False
    sock = transport.get_extra_info("socket")
    if sock is not None:
        # linger 0: close() sends RST, so the client sees "connection reset by peer"
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()
    return True


async def until_disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def sleep_unless_disconnected(request: Request, seconds: float) -> bool:
    """Sleep; False as soon as the client goes away (a hang must not outlive its client)."""
    if seconds <= 0:
        return True
    watcher = asyncio.ensure_future(until_disconnected(request.receive))
    try:
        await within(asyncio.shield(watcher), seconds)
        return False
    except TimeoutError:
        return True
    finally:
        watcher.cancel()


class PartialThenReset(Response):
    """Headers and half of the promised body, then a reset: a connection cut mid-response."""

    def __init__(self, body: bytes):
        super().__init__(body, 200, media_type=JSON)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        await send({"type": "http.response.body", "body": self.body[: len(self.body) // 2],
                    "more_body": True})
        await asyncio.sleep(0.01)  # let the half body leave before the reset
        if abort_connection(scope):
            await until_disconnected(receive)
        else:
            raise ConnectionAbortedError("simulated reset")


class EventStream(Response):
    """SSE from an async iterator, stopped as soon as the client disconnects.

    Starlette's StreamingResponse does the same through an anyio task group, which costs
    more than the rest of a simulated stream; two plain tasks do here.
    """

    media_type = "text/event-stream"

    def __init__(self, chunks: AsyncGenerator[bytes, None], headers: dict[str, str]):
        self.chunks = chunks
        self.status_code = 200
        self.background = None
        self.raw_headers = [(b"content-type", b"text/event-stream; charset=utf-8"),
                            (b"cache-control", b"no-cache"),
                            *((k.encode(), v.encode()) for k, v in headers.items())]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        pump = asyncio.ensure_future(self._pump(send))
        watcher = asyncio.ensure_future(until_disconnected(receive))
        try:
            await asyncio.wait((pump, watcher), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (pump, watcher):
                task.cancel()
            await asyncio.gather(pump, watcher, return_exceptions=True)
        if pump.done() and not pump.cancelled() and pump.exception() is not None:
            raise pump.exception()  # type: ignore[misc]

    async def _pump(self, send: Send) -> None:
        try:
            async for chunk in self.chunks:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            await self.chunks.aclose()  # its `finally` runs now, not when collected
