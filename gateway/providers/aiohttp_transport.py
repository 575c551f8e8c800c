"""An httpx transport that sends through aiohttp's connection pool.

httpx's own pool (httpcore) spends about 4 ms of CPU per request at 64 concurrent
requests on this project's 2-core machines, against 0.13 ms for aiohttp (measured with
`costgate bench`; see encode/httpx#3215). The gateway keeps httpx's API, and tests keep
`httpx.MockTransport`, while the bytes travel through aiohttp.

aiohttp's errors are mapped to httpx's exception classes, which the retry policy
classifies; timeouts come from each request's httpx timeout extension.

Why not the httpx-aiohttp package (0.2.0), which does the same: it maps every
aiohttp.ClientConnectionError to httpx.ConnectTimeout, so a refused port and a reset
before the response headers are classified as TIMEOUT, not CONNECT_ERROR or RESET (two
tests in tests/gateway/providers/test_aiohttp_transport.py fail against it). It is not
cheaper either:
`python -m gateway.devtools.transport_bench --requests 2000 --rounds 3 --seconds 1200`
(uvloop, a zero-latency sim returning 64-token answers, 2 cores shared with other work)
measured CPU ms per request for ours / httpx-aiohttp / httpx's pool: 0.46 / 0.52 / 8.1
(JSON, 64 concurrent), 0.62 / 0.71 / 6.7 (stream, 64), 0.75 / 0.77 / 3.4 (JSON, 1) and
0.66 / 0.69 / 3.9 (stream, 1). At 64 concurrent it did 1650 / 1391 / 106 req/s (JSON)
and 734 / 778 / 108 (stream), with much run-to-run noise in req/s.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp
import httpx


def _timeout(request: httpx.Request) -> aiohttp.ClientTimeout:
    return client_timeout(request.extensions.get("timeout") or {})


def client_timeout(t: Mapping[str, float | None]) -> aiohttp.ClientTimeout:
    """aiohttp's timeouts for httpx's (connect, read, pool) of one provider."""
    return aiohttp.ClientTimeout(
        total=None,  # the caller bounds the whole call (asyncio.timeout)
        connect=t.get("pool"),
        sock_connect=t.get("connect"),
        sock_read=t.get("read"),
    )


@dataclasses.dataclass(frozen=True, slots=True)
class WholeReply:
    """What the gateway reads of a whole (not streamed) upstream answer."""

    status: int
    retry_after: str | None  # the Retry-After header, as sent
    content: bytes  # decoded if it came compressed


def _map_error(err: BaseException, request: httpx.Request | None) -> Exception:
    # order matters: aiohttp's connection timeout is also a ServerTimeoutError
    if isinstance(err, aiohttp.ConnectionTimeoutError):
        return httpx.ConnectTimeout(str(err) or "connect timeout", request=request)
    if isinstance(err, aiohttp.ServerTimeoutError | asyncio.TimeoutError):
        return httpx.ReadTimeout(str(err) or "read timeout", request=request)
    if isinstance(err, aiohttp.ClientConnectorError):
        return httpx.ConnectError(str(err), request=request)
    if isinstance(err, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError):
        return httpx.RemoteProtocolError(str(err) or "server disconnected", request=request)
    if isinstance(err, aiohttp.ClientOSError | ConnectionError):
        return httpx.ReadError(str(err), request=request)
    if isinstance(err, aiohttp.ClientError):
        return httpx.TransportError(str(err))
    return err if isinstance(err, Exception) else RuntimeError(str(err))


class _Body(httpx.AsyncByteStream):
    def __init__(self, response: aiohttp.ClientResponse, request: httpx.Request) -> None:
        self._response = response
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.content.iter_any():
                yield chunk
        except (TimeoutError, aiohttp.ClientError, ConnectionError) as err:
            raise _map_error(err, self._request) from err

    async def aclose(self) -> None:
        # release() returns a fully read connection to the pool; a half-read one is
        # closed, which is what a client that went away mid-stream needs upstream
        if self._response.content.at_eof():
            self._response.release()
        else:
            self._response.close()


class AiohttpTransport(httpx.AsyncBaseTransport):
    def __init__(self, *, max_connections: int = 512, keepalive_s: float = 30.0) -> None:
        self._max_connections = max_connections
        self._keepalive_s = keepalive_s
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        # created on first use, inside the event loop that will use it
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(
                    limit=self._max_connections,
                    keepalive_timeout=self._keepalive_s,
                    enable_cleanup_closed=True,
                ),
                auto_decompress=False,  # httpx decodes content-encoding itself
                skip_auto_headers=("User-Agent", "Accept-Encoding"),
            )
        return self._session

    async def _send(self, request: httpx.Request) -> aiohttp.ClientResponse:
        body = request.content if request.content else await request.aread()
        try:
            return await self._client().request(
                request.method,
                str(request.url),
                headers=list(request.headers.multi_items()),
                data=body,
                timeout=_timeout(request),
                allow_redirects=False,
            )
        except (TimeoutError, aiohttp.ClientError, ConnectionError) as err:
            raise _map_error(err, request) from err

    def _response(
        self, response: aiohttp.ClientResponse, request: httpx.Request, **body: Any
    ) -> httpx.Response:
        return httpx.Response(
            status_code=response.status,
            headers=[(k, v) for k, v in response.raw_headers],
            extensions={"http_version": b"HTTP/1.1"},
            request=request,
            **body,
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._send(request)
        return self._response(response, request, stream=_Body(response, request))

    async def post(
        self, url: str, headers: Mapping[str, str], content: bytes, timeout: aiohttp.ClientTimeout
    ) -> WholeReply:
        """POST and read the whole answer, with no httpx Request or Response around it:
        building those two was a twelfth of a replica's CPU per request at 64 concurrent
        requests (docs/PERFORMANCE.md). Errors are raised as `handle_async_request`'s."""
        try:
            response = await self._client().request(
                "POST", url, headers=headers, data=content, timeout=timeout,
                allow_redirects=False,
            )  # fmt: skip
        except (TimeoutError, aiohttp.ClientError, ConnectionError) as err:
            raise _map_error(err, None) from err
        try:
            raw = await response.read()
        except (TimeoutError, aiohttp.ClientError, ConnectionError) as err:
            response.close()
            raise _map_error(err, None) from err
        except BaseException:
            response.close()  # cancelled mid-body: the connection cannot be reused
            raise
        retry_after = response.headers.get("retry-after")
        if response.headers.get("content-encoding", "identity") != "identity":
            # httpx decodes what it was sent compressed, as it always did
            raw = httpx.Response(response.status, headers=response.raw_headers, content=raw).content
        return WholeReply(response.status, retry_after, raw)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
