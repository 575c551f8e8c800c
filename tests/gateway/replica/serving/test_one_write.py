"""An answer's head and body leave in one write, through a real uvicorn server with the
httptools protocol (as Serve runs it), counted at the server's socket transports."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
import uvicorn
from starlette.responses import Response, StreamingResponse

from gateway.replica.serving import one_write

BODY = b'{"answer": "hello"}'


async def app(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    path = scope["path"]
    if path == "/stream":

        async def chunks() -> AsyncIterator[bytes]:
            for part in (b"one ", b"two"):
                yield part

        await StreamingResponse(chunks())(scope, receive, send)
    elif path == "/late":
        # the body comes in a later turn of the loop: the head must not wait for it
        headers = [(b"content-length", str(len(BODY)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await scope["state"]["release"].wait()
        await send({"type": "http.response.body", "body": BODY})
    else:
        await Response(BODY, media_type="application/json")(scope, receive, send)


class Server:
    """uvicorn on an ephemeral port, and what the server side wrote, write by write."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.release = asyncio.Event()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]

    async def request(self, head: bytes) -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        writer.write(head)
        data = await reader.read()  # Connection: close: the server closes after the answer
        writer.close()
        return data


@pytest.fixture
async def server(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Server]:
    srv = Server()
    original = asyncio.selector_events._SelectorSocketTransport.write  # type: ignore[attr-defined]

    def counted(transport: Any, data: Any) -> None:
        if transport.get_extra_info("sockname")[1] == srv.port:
            srv.writes.append(bytes(data))
        original(transport, data)

    monkeypatch.setattr(asyncio.selector_events._SelectorSocketTransport, "write", counted)  # type: ignore[attr-defined]

    async def with_state(scope: Any, receive: Any, send: Any) -> None:
        scope["state"] = {"release": srv.release}
        await app(scope, receive, send)

    config = uvicorn.Config(with_state, http="httptools", loop="asyncio", lifespan="off",
                            log_level="warning", access_log=False)  # fmt: skip
    uv = uvicorn.Server(config)
    task = asyncio.get_running_loop().create_task(uv.serve(sockets=[srv.sock]))
    while not uv.started:
        await asyncio.sleep(0.01)
    try:
        yield srv
    finally:
        uv.should_exit = True
        await task
        one_write.uninstall()


def get(path: str, method: str = "GET") -> bytes:
    return f"{method} {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n".encode()


async def test_without_it_uvicorn_writes_head_and_body_apart(server: Server) -> None:
    one_write.uninstall()
    answer = await server.request(get("/"))
    assert answer.endswith(b"\r\n\r\n" + BODY)
    assert len(server.writes) == 2 and server.writes[1] == BODY


async def test_a_plain_answer_is_one_write_with_the_same_bytes(server: Server) -> None:
    assert one_write.install()
    answer = await server.request(get("/"))
    assert server.writes == [answer]
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n") and answer.endswith(b"\r\n\r\n" + BODY)
    assert b"content-length: %d\r\n" % len(BODY) in answer


async def test_streams_and_head_requests_are_written_as_before(server: Server) -> None:
    assert one_write.install()
    streamed = await server.request(get("/stream"))
    assert b"transfer-encoding: chunked" in streamed
    assert streamed.endswith(b"4\r\none \r\n3\r\ntwo\r\n0\r\n\r\n")
    assert len(server.writes) >= 3  # the head alone, then the chunks, as uvicorn does
    server.writes.clear()
    head = await server.request(get("/", "HEAD"))
    assert head.endswith(b"\r\n\r\n") and BODY not in head
    assert server.writes == [head]


async def test_a_head_whose_body_comes_later_is_not_held_back(server: Server) -> None:
    assert one_write.install()
    answer = asyncio.get_running_loop().create_task(server.request(get("/late")))
    for _ in range(200):  # the head goes out at the end of the turn that held it
        if server.writes:
            break
        await asyncio.sleep(0.01)
    assert len(server.writes) == 1 and server.writes[0].startswith(b"HTTP/1.1 200 OK")
    assert server.writes[0].endswith(b"\r\n\r\n")
    server.release.set()
    assert (await answer).endswith(b"\r\n\r\n" + BODY)
    assert server.writes[1:] == [BODY]
