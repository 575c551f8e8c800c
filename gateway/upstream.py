"""Calls to upstream providers: one shared httpx.AsyncClient per replica.

Every failure becomes an `UpstreamFailure` with a reason from a small vocabulary (the
retry policy, the breaker, the ledger and the metrics all key on it). Provider keys go
into the Authorization header and nowhere else: upstream error texts are scrubbed of them
before they can reach a client or a log.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from typing import Any

import httpx

from gateway.config import Config, Model, Provider

# Reasons, a bounded vocabulary shared with retry_policy, metrics and the ledger.
RATE_LIMITED = "rate_limited"
UPSTREAM_5XX = "upstream_5xx"
UPSTREAM_4XX = "upstream_4xx"
UPSTREAM_AUTH = "upstream_auth"
TIMEOUT = "timeout"
CONNECT_ERROR = "connect_error"
RESET = "reset"
MALFORMED = "malformed"


class UpstreamFailure(Exception):
    def __init__(
        self,
        reason: str,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        error_body: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.status = status
        self.retry_after = retry_after
        self.error_body = error_body  # an upstream 4xx body, scrubbed, to pass on


@dataclasses.dataclass(frozen=True, slots=True)
class UpstreamReply:
    body: dict[str, Any]
    latency_ms: int


def _scrub(text: str, provider: Provider) -> str:
    key = provider.api_key()
    if key and len(key) >= 4:
        text = text.replace(key, "[redacted]")
    return text


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP date: rare from LLM providers; the backoff applies instead


def failure_from_status(
    response: httpx.Response, content: bytes, provider: Provider
) -> UpstreamFailure:
    status = response.status_code
    where = f"{provider.name} answered HTTP {status}"
    if status == 429:
        return UpstreamFailure(
            RATE_LIMITED,
            f"{where} (rate limited)",
            status=status,
            retry_after=_retry_after(response),
        )
    if status >= 500:
        return UpstreamFailure(UPSTREAM_5XX, where, status=status)
    if status in (401, 403):
        # our provider key is wrong: the app cannot fix that, and the text may quote the key
        return UpstreamFailure(
            UPSTREAM_AUTH,
            f"{where}: the gateway's provider credentials were rejected",
            status=status,
        )
    error_body = None
    try:
        parsed = json.loads(_scrub(content.decode("utf-8", "replace"), provider))
        if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
            error_body = {"error": parsed["error"]}
    except ValueError:
        pass
    return UpstreamFailure(UPSTREAM_4XX, where, status=status, error_body=error_body)


def failure_from_exception(err: Exception, provider: Provider) -> UpstreamFailure:
    name = provider.name
    if isinstance(err, httpx.TimeoutException | TimeoutError):
        if isinstance(err, httpx.ConnectTimeout):
            return UpstreamFailure(CONNECT_ERROR, f"connecting to {name} timed out")
        return UpstreamFailure(TIMEOUT, f"{name} did not answer in time")
    if isinstance(err, httpx.ConnectError):
        return UpstreamFailure(CONNECT_ERROR, f"cannot connect to {name}")
    if isinstance(err, httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError):
        return UpstreamFailure(RESET, f"{name} closed the connection")
    return UpstreamFailure(RESET, f"the call to {name} failed ({type(err).__name__})")


class UpstreamClient:
    def __init__(self, cfg: Config, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self._cfg = cfg
        self._client = httpx.AsyncClient(
            transport=transport,
            limits=httpx.Limits(
                max_connections=max(p.max_connections for p in cfg.providers),
                max_keepalive_connections=256,
                keepalive_expiry=30,
            ),
            # per provider below; this default only guards a call that names none
            timeout=httpx.Timeout(60.0, connect=3.0),
            follow_redirects=False,
        )

    def _request(self, model: Model, body: dict[str, Any]) -> tuple[Provider, httpx.Request]:
        provider = self._cfg.provider(model.provider)
        headers = {"content-type": "application/json", "accept": "application/json"}
        key = provider.api_key()
        if key:
            headers["authorization"] = f"Bearer {key}"
        t = provider.timeouts
        request = self._client.build_request(
            "POST",
            provider.base_url.rstrip("/") + "/chat/completions",
            content=json.dumps(body, separators=(",", ":")).encode(),
            headers=headers,
            timeout=httpx.Timeout(connect=t.connect, read=t.read, write=t.read, pool=t.connect),
        )
        return provider, request

    async def complete(self, model: Model, body: dict[str, Any]) -> UpstreamReply:
        provider, request = self._request(model, body)
        started = time.perf_counter()
        try:
            async with asyncio.timeout(provider.timeouts.total):
                response = await self._client.send(request)
        except Exception as err:  # noqa: BLE001 - every transport failure is classified
            raise failure_from_exception(err, provider) from None
        latency_ms = int((time.perf_counter() - started) * 1000)
        content = response.content
        if response.status_code != 200:
            raise failure_from_status(response, content, provider)
        try:
            parsed = json.loads(content)
        except ValueError:
            raise UpstreamFailure(
                MALFORMED, f"{provider.name} sent a body that is not JSON", status=200
            ) from None
        if not isinstance(parsed, dict) or not isinstance(parsed.get("choices"), list):
            raise UpstreamFailure(MALFORMED, f"{provider.name} sent no completion", status=200)
        return UpstreamReply(body=parsed, latency_ms=latency_ms)

    async def open_stream(self, model: Model, body: dict[str, Any]) -> httpx.Response:
        """Send the request and return the response once its status says it streams."""
        provider, request = self._request(model, body)
        try:
            async with asyncio.timeout(provider.timeouts.total):
                response = await self._client.send(request, stream=True)
        except Exception as err:  # noqa: BLE001
            raise failure_from_exception(err, provider) from None
        if response.status_code != 200:
            try:
                content = await response.aread()
            except Exception:  # noqa: BLE001 - the status already says what happened
                content = b""
            finally:
                await response.aclose()
            raise failure_from_status(response, content, provider)
        return response

    async def aclose(self) -> None:
        await self._client.aclose()
