"""A TCP forwarder in front of PostgreSQL that a chaos scenario can cut and restore.

The gateway's replicas reach the ledger only through it, so `block()` is a real outage
for them (open connections reset, new ones refused) while the server, which other
people share, keeps running and the suite can still read the ledger directly.
It runs its own event loop in a thread: the scenarios that drive it are synchronous.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Coroutine
from typing import Any

from sqlalchemy import make_url


def free_port() -> int:
    # the kernel's choice: a fixed range would race with other sessions' proxies
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class DatabaseProxy:
    """`url` reaches the database of `database_url` through 127.0.0.1:`port`."""

    def __init__(self, database_url: str) -> None:
        target = make_url(database_url)
        socket_dir = target.query.get("host")
        port = target.port or 5432
        # the embedded server listens on a Unix socket only
        if isinstance(socket_dir, str) and socket_dir.startswith("/"):
            self._unix: str | None = f"{socket_dir}/.s.PGSQL.{port}"
        else:
            self._unix = None
        self._tcp = (target.host or "127.0.0.1", port)
        self.port = free_port()
        self.url = target.set(
            host="127.0.0.1",
            port=self.port,
            query={k: v for k, v in target.query.items() if k != "host"},
        ).render_as_string(hide_password=False)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.blocked = False

    def start(self) -> DatabaseProxy:
        self._thread.start()
        self.unblock()
        return self

    def block(self) -> None:
        """Reset every open connection and refuse new ones."""
        self._call(self._block())
        self.blocked = True

    def unblock(self) -> None:
        self._call(self._listen())
        self.blocked = False

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        self._call(self._shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()

    def _call(self, coro: Coroutine[Any, Any, None]) -> None:
        asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=10)

    async def _listen(self) -> None:
        if self._server is None:
            self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)

    async def _block(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    async def _shutdown(self) -> None:
        await self._block()
        me = asyncio.current_task()
        pending = [t for t in asyncio.all_tasks() if t is not me]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            if self._unix:
                up_reader, up_writer = await asyncio.open_unix_connection(self._unix)
            else:
                up_reader, up_writer = await asyncio.open_connection(*self._tcp)
        except OSError:
            writer.transport.abort()
            return
        self._writers |= {writer, up_writer}
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        self._writers -= {writer, up_writer}


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (OSError, asyncio.IncompleteReadError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.transport.abort()
