"""A whole answer leaves in one write: its head together with its body.

uvicorn writes an answer's status line and headers when the app sends
`http.response.start`, and the body when it sends `http.response.body`: two `write(2)`
calls, two TCP segments and two wake-ups of HAProxy for every plain answer. The socket
writes were about a tenth of a replica's CPU at 64 concurrent requests
(docs/PERFORMANCE.md). Serve builds uvicorn's server itself and offers no way to change
its protocol, so `install()` wraps the `send` of uvicorn's httptools protocol in this
process: the head of an answer with a Content-Length is held until its first body
message and written with it in one call. Chunked answers (streams) and HEAD are as
before. A head whose body does not follow in the same turn of the event loop is written
on its own at the end of that turn, so no bytes wait on the app.

It is uvicorn's internal API: `install()` checks the names it needs and leaves uvicorn
as it is (logging why) if they changed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

log = logging.getLogger("costgate.ingress")

_HELD = "_costgate_held_head"  # the attribute that holds a cycle's unwritten head
_original: Callable[..., Coroutine[Any, Any, None]] | None = None


class _Capture:
    """Takes the place of the transport while uvicorn writes a head: keeps the bytes."""

    __slots__ = ("data",)

    def __init__(self) -> None:
        self.data = b""

    def write(self, data: bytes) -> None:
        self.data += data


class _Prefixed:
    """The transport for a body message: its first write carries the held head."""

    __slots__ = ("_transport", "head")

    def __init__(self, transport: asyncio.Transport, head: bytes) -> None:
        self._transport = transport
        self.head: bytes | None = head

    def write(self, data: bytes) -> None:
        head, self.head = self.head, None
        self._transport.write(data if head is None else head + data)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def flush(self) -> None:
        head, self.head = self.head, None
        if head is not None and not self._transport.is_closing():
            self._transport.write(head)


def _flush_held(cycle: Any) -> None:
    """The end of the turn in which a head was held: write it if no body took it."""
    head = cycle.__dict__.pop(_HELD, None)
    if head is not None and not cycle.transport.is_closing():
        cycle.transport.write(head)


async def _send(cycle: Any, message: Any) -> None:
    assert _original is not None
    kind = message["type"]
    if kind == "http.response.start" and not cycle.response_started:
        if cycle.scope["method"] == "HEAD" or not _has_content_length(message):
            await _original(cycle, message)
            return
        transport, capture = cycle.transport, _Capture()
        cycle.transport = capture
        try:
            await _original(cycle, message)
        finally:
            cycle.transport = transport
        if capture.data:
            setattr(cycle, _HELD, capture.data)
            asyncio.get_running_loop().call_soon(_flush_held, cycle)
        return
    head = cycle.__dict__.pop(_HELD, None)
    if head is None:
        await _original(cycle, message)
        return
    transport, prefixed = cycle.transport, _Prefixed(cycle.transport, head)
    cycle.transport = prefixed
    try:
        await _original(cycle, message)
    finally:
        cycle.transport = transport
        prefixed.flush()  # a body message that wrote nothing (an error, an empty body)


def _has_content_length(message: Any) -> bool:
    return any(name.lower() == b"content-length" for name, _ in message.get("headers", ()))


def install() -> bool:
    """Wrap uvicorn's httptools `send` in this process; True when it is in place."""
    global _original
    try:
        from uvicorn.protocols.http.httptools_impl import RequestResponseCycle
    except ImportError:  # httptools missing: uvicorn serves with h11, as it was
        log.warning("uvicorn's httptools protocol is unavailable: answers keep two writes")
        return False
    if _original is not None:
        return True
    # what `_send` relies on: the attributes uvicorn's constructor sets, and `send` itself
    assigned = RequestResponseCycle.__init__.__code__.co_names
    if not asyncio.iscoroutinefunction(getattr(RequestResponseCycle, "send", None)) or not all(
        name in assigned for name in ("response_started", "transport", "scope")
    ):
        log.warning("this uvicorn's RequestResponseCycle changed: answers keep two writes")
        return False
    _original = RequestResponseCycle.send
    RequestResponseCycle.send = _send  # type: ignore[method-assign,assignment]
    return True


def uninstall() -> None:
    """Put uvicorn's own `send` back (tests compare the two)."""
    global _original
    if _original is None:
        return
    from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

    RequestResponseCycle.send = _original  # type: ignore[method-assign]
    _original = None
