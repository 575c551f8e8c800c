"""Calls to upstream providers: one shared transport (aiohttp's pool) per replica.

The wire format is the provider's adapter's (`gateway.providers.registry`): this module
sends what the adapter builds, enforces each provider's timeouts, and turns every way a
call can fail into an `UpstreamFailure` with a reason from a small vocabulary (the
retry policy, the breaker, the ledger and the metrics all key on it). Provider keys go
into the Authorization header and nowhere else: upstream error texts are scrubbed of them
before they can reach a client or a log.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import time
from collections.abc import Callable
from typing import Any

import httpx

from gateway.domain.config import Config, Model, Provider
from gateway.providers.adapter import ChatReply, MalformedReply, ProviderAdapter, WireRequest
from gateway.providers.aiohttp_transport import AiohttpTransport, WholeReply, client_timeout
from gateway.providers.registry import adapter_for
from gateway.routing.retry_policy import FailureReason, Verdict, classify, parse_retry_after

# builds the wire request from (provider, body, provider key)
WireBuilder = Callable[[Provider, dict[str, Any], str | None], WireRequest]


class UpstreamFailure(Exception):
    def __init__(
        self,
        verdict: Verdict,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        error_body: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.verdict = verdict
        self.message = message
        self.status = status
        self.retry_after = retry_after
        self.error_body = error_body  # an upstream 4xx body, scrubbed, to pass on

    @property
    def reason(self) -> str:
        return self.verdict.reason.value


@dataclasses.dataclass(frozen=True, slots=True)
class UpstreamReply:
    reply: ChatReply
    latency_ms: int


def _scrub(text: str, provider: Provider) -> str:
    key = provider.api_key()
    if key and len(key) >= 4:
        text = text.replace(key, "[redacted]")
    return text


def failure_from_status(
    status: int,
    retry_after_header: str | None,
    content: bytes,
    provider: Provider,
    adapter: ProviderAdapter | None = None,
) -> UpstreamFailure:
    verdict = classify(status) or classify(500)
    assert verdict is not None
    where = f"{provider.name} answered HTTP {status}"
    if verdict.reason is FailureReason.UPSTREAM_AUTH:
        # our provider key is wrong: the app cannot fix that, and the text may quote the key
        where += ": the gateway's provider credentials were rejected"
        return UpstreamFailure(verdict, where, status=status)
    retry_after = parse_retry_after(retry_after_header)
    error_body = None
    if 400 <= status < 500 and status != 429:
        scrubbed = _scrub(content.decode("utf-8", "replace"), provider).encode()
        error_body = (adapter or adapter_for(provider)).error_body(scrubbed)
    return UpstreamFailure(
        verdict, where, status=status, retry_after=retry_after, error_body=error_body
    )


_EXCEPTION_WORDS = {
    FailureReason.TIMEOUT: "did not answer in time",
    FailureReason.CONNECT_ERROR: "could not be reached",
    FailureReason.RESET: "closed the connection",
}


def failure_from_exception(err: BaseException, provider: Provider) -> UpstreamFailure:
    verdict = classify(err)
    assert verdict is not None
    words = _EXCEPTION_WORDS.get(verdict.reason, f"failed ({type(err).__name__})")
    return UpstreamFailure(verdict, f"{provider.name} {words}")


def malformed(provider: Provider, what: str) -> UpstreamFailure:
    verdict = Verdict(FailureReason.MALFORMED, retryable=False, affects_health=True)
    return UpstreamFailure(verdict, f"{provider.name} sent {what}", status=200)


# what httpx.AsyncClient added to every request before the client was bypassed (below);
# no Accept-Encoding: an identity body is cheaper to relay than one to decompress
_DEFAULT_HEADERS = {"accept": "*/*", "connection": "keep-alive", "user-agent": "costgate"}


@functools.lru_cache(maxsize=256)
def _url(text: str) -> httpx.URL:
    # a replica calls a handful of URLs (one per provider and API): parse each once
    return httpx.URL(text)


class UpstreamClient:
    """Sends straight to the transport, without httpx.AsyncClient's send path: its
    cookie jar, auth and redirect hooks and URL merging were a fifth of a replica's CPU
    at 64 concurrent requests (docs/PERFORMANCE.md), and the gateway uses none of them
    (no cookies, no redirects, the provider key is a header the adapter writes)."""

    def __init__(self, cfg: Config, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self._cfg = cfg
        max_connections = max(p.max_connections for p in cfg.providers)
        self._transport = transport or AiohttpTransport(max_connections=max_connections)
        self._timeouts: dict[str, dict[str, float | None]] = {}
        # aiohttp's pool, for whole answers without httpx's Request and Response; None
        # for another transport (tests' httpx.MockTransport), which goes through httpx
        self._aiohttp = self._transport if isinstance(self._transport, AiohttpTransport) else None
        self._aiohttp_timeouts: dict[str, Any] = {}

    def _timeout(self, provider: Provider) -> dict[str, float | None]:
        found = self._timeouts.get(provider.name)
        if found is None:
            t = provider.timeouts
            timeout = httpx.Timeout(connect=t.connect, read=t.read, write=t.read, pool=t.connect)
            found = self._timeouts[provider.name] = timeout.as_dict()
        return found

    def _wire(
        self, model: Model, body: dict[str, Any], build: WireBuilder | None
    ) -> tuple[Provider, ProviderAdapter, WireRequest]:
        provider = self._cfg.provider(model.provider)
        adapter = adapter_for(provider)
        # `build`: a native request of another API than chat (Anthropic's Messages)
        wire = (build or adapter.chat_request)(provider, body, provider.api_key())
        return provider, adapter, wire

    def _http_request(self, provider: Provider, wire: WireRequest) -> httpx.Request:
        return httpx.Request(
            "POST",
            _url(wire.url),
            content=wire.content,
            headers=_DEFAULT_HEADERS | dict(wire.headers),
            extensions={"timeout": self._timeout(provider)},
        )

    async def _whole(
        self, provider: Provider, wire: WireRequest, request: httpx.Request | None
    ) -> WholeReply:
        """A whole answer: straight through aiohttp's pool, else (`request` given) through
        the transport as httpx sends it."""
        if request is not None:
            response = await self._transport.handle_async_request(request)
            try:
                content = await response.aread()
            except BaseException:
                await response.aclose()  # the connection, not the pool, is dropped
                raise
            return WholeReply(response.status_code, response.headers.get("retry-after"), content)
        assert self._aiohttp is not None
        timeout = self._aiohttp_timeouts.get(provider.name)
        if timeout is None:
            timeout = client_timeout(self._timeout(provider))
            self._aiohttp_timeouts[provider.name] = timeout
        headers = _DEFAULT_HEADERS | wire.headers
        return await self._aiohttp.post(wire.url, headers, wire.content, timeout)

    async def complete(
        self,
        model: Model,
        body: dict[str, Any],
        build: WireBuilder | None = None,
        parse: Callable[[bytes], ChatReply] | None = None,
    ) -> UpstreamReply:
        # built before the call: what the adapter refuses (the client's 400) or a header
        # httpx refuses must not be classified below as the upstream's failure (a 502)
        provider, adapter, wire = self._wire(model, body, build)
        request = None if self._aiohttp is not None else self._http_request(provider, wire)
        started = time.perf_counter()
        try:
            async with asyncio.timeout(provider.timeouts.total):
                whole = await self._whole(provider, wire, request)
        except Exception as err:  # noqa: BLE001 - every transport failure is classified
            raise failure_from_exception(err, provider) from None
        latency_ms = int((time.perf_counter() - started) * 1000)
        if whole.status != 200:
            raise failure_from_status(
                whole.status, whole.retry_after, whole.content, provider, adapter
            )
        try:
            reply = (parse or adapter.parse_chat)(whole.content)
        except MalformedReply as err:
            raise malformed(provider, str(err)) from None
        return UpstreamReply(reply=reply, latency_ms=latency_ms)

    async def open_stream(
        self, model: Model, body: dict[str, Any], build: WireBuilder | None = None
    ) -> httpx.Response:
        """Send the request and return the response once its status says it streams."""
        provider, adapter, wire = self._wire(model, body, build)
        request = self._http_request(provider, wire)
        try:
            async with asyncio.timeout(provider.timeouts.total):
                response = await self._transport.handle_async_request(request)
        except Exception as err:  # noqa: BLE001
            raise failure_from_exception(err, provider) from None
        if response.status_code != 200:
            try:
                content = await response.aread()
            except Exception:  # noqa: BLE001 - the status already says what happened
                content = b""
            finally:
                await response.aclose()
            raise failure_from_status(
                response.status_code, response.headers.get("retry-after"), content, provider,
                adapter,
            )  # fmt: skip
        return response

    async def aclose(self) -> None:
        await self._transport.aclose()
