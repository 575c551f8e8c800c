"""Relaying an upstream SSE stream to the client, chunk by chunk, never buffered.

The provider's stream parser (`gateway.providers.adapter.StreamParser`) turns each
upstream event into OpenAI chat chunks; the relay rewrites them for the client (the
model it asked for, usage only if it asked) and notes the time to the first token.
Whatever way the stream ends (done, upstream failure, or the client going away, which
arrives as a CancelledError at a `yield`) it reports the outcome once and closes the
upstream response, without awaiting the database.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
from fastapi.responses import StreamingResponse

from gateway.domain.config import Model, Provider
from gateway.domain.usage_record import RequestStatus
from gateway.providers.adapter import MalformedReply, StreamParser
from gateway.providers.client import (
    UpstreamClient,
    UpstreamFailure,
    failure_from_exception,
    malformed,
)
from gateway.providers.sse import DONE, SSEDecoder, encode_event
from gateway.replica.chat_request import ChatRequest, upstream_body
from gateway.replica.exchange import Exchange
from gateway.routing.retry_policy import FailureReason


@dataclasses.dataclass(frozen=True, slots=True)
class OpenedStream:
    """A stream that answered 200 and whose first event arrived: from here on, bytes go
    to the client and the attempt can no longer move to another model."""

    response: httpx.Response
    raw: AsyncIterator[bytes]
    decoder: SSEDecoder
    first: list[bytes]


async def open_stream(
    upstream: UpstreamClient, model: Model, provider: Provider, req: ChatRequest
) -> OpenedStream:
    """One streaming attempt, up to its first event (an `UpstreamFailure` before it)."""
    response = await upstream.open_stream(model, upstream_body(req, model.upstream_model))
    # Read up to the first event before answering 200: until a byte reaches the
    # client, a reset or a broken first chunk can still be retried elsewhere.
    raw = response.aiter_raw()
    decoder = SSEDecoder()
    first: list[bytes] = []
    try:
        while not first:
            chunk = await anext(raw)
            first.extend(decoder.feed(chunk))
    except StopAsyncIteration:
        await response.aclose()
        raise malformed(provider, "an empty stream") from None
    except UpstreamFailure:
        await response.aclose()
        raise
    except MalformedReply as err:
        await response.aclose()
        raise malformed(provider, str(err)) from None
    except Exception as err:  # noqa: BLE001 - classified for the retry policy
        await response.aclose()
        raise failure_from_exception(err, provider) from None
    return OpenedStream(response, raw, decoder, first)


DRAIN_TIMEOUT_S = 1.0
# the ledger's error class of a stream cut at its overall deadline
STREAM_DEADLINE = "stream_deadline"

# status, http status, error class, parser: how the stream ended and what it carried
Outcome = Callable[[RequestStatus, int, str | None, StreamParser], None]


class RelayResponse(StreamingResponse):
    """A stream whose clean-up runs even if the client leaves before it starts.

    An async generator that never started never runs its `finally`, which would leave
    the upstream connection open and the request unrecorded.
    """

    def __init__(
        self,
        content: AsyncIterator[bytes],
        *,
        started: Callable[[], bool],
        on_abandon: Callable[[], None],
        **kwargs: Any,
    ) -> None:
        super().__init__(content, **kwargs)
        self._started = started
        self._on_abandon = on_abandon

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            if not self._started():
                self._on_abandon()


async def _drain(raw: AsyncIterator[bytes]) -> None:
    """Read the little that follows [DONE] (the body's end), so that the upstream
    connection goes back to the pool instead of being closed."""
    with contextlib.suppress(Exception):
        async with asyncio.timeout(DRAIN_TIMEOUT_S):
            async for _ in raw:
                pass


def client_chunk(chunk: dict[str, Any], *, public_model: str, include_usage: bool) -> bytes | None:
    """One OpenAI chunk as the client gets it (None: send nothing).

    Usage is always asked of the upstream, so that no stream is logged at $0; a client
    that did not ask for it does not get it.
    """
    if not include_usage:
        if chunk.get("choices") == [] and chunk.get("usage") is not None:
            return None  # the usage chunk the client did not ask for
        chunk.pop("usage", None)
    if "model" in chunk:
        chunk["model"] = public_model
    return encode_event(chunk)


def stream_error(message: str) -> bytes:
    """OpenAI's way to end a stream that already started: an error event."""
    return encode_event(
        {"error": {"message": message, "type": "upstream_error", "param": None, "code": None}}
    )


async def relay(
    ex: Exchange,
    response: httpx.Response,
    raw: AsyncIterator[bytes],
    decoder: SSEDecoder,
    first: list[bytes],
    parser: StreamParser,
    provider: Provider,
    on_end: Outcome,
) -> AsyncIterator[bytes]:
    assert ex.request is not None
    ex.relay_started = True
    include_usage = ex.request.include_usage
    public_model = ex.requested
    # the whole stream's deadline, from the first event on (the headers had their own)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + provider.timeouts.stream_total
    status, http_status = RequestStatus.CANCELLED, 200
    error_class: str | None = "client_disconnected"
    try:
        pending = first
        done = False
        while True:
            for payload in pending:
                chunks = parser.feed(payload)
                done = parser.done
                if done:
                    # the outcome is settled before the last event leaves: a client
                    # that hangs up right after [DONE] did not cancel anything
                    status, error_class = RequestStatus.OK, None
                for chunk in chunks:
                    out = client_chunk(
                        chunk, public_model=public_model, include_usage=include_usage
                    )
                    if out is not None:
                        if ex.ttft_ms is None:
                            ex.ttft_ms = ex.elapsed_ms()
                        yield out
                if done:
                    if ex.ttft_ms is None:
                        ex.ttft_ms = ex.elapsed_ms()
                    yield encode_event(DONE)
                    break
            if done:
                await _drain(raw)
                break
            try:
                async with asyncio.timeout_at(deadline):
                    received = await anext(raw)
            except StopAsyncIteration:
                pending = list(decoder.flush())
                if not pending:
                    break
                continue
            pending = list(decoder.feed(received))
        if done or parser.finished:
            status, error_class = RequestStatus.OK, None
        else:
            status, http_status = RequestStatus.UPSTREAM_ERROR, 502
            error_class = FailureReason.RESET.value
            yield stream_error("the upstream stream ended early")
    except TimeoutError as err:
        if loop.time() < deadline:  # not ours: a transport's own timeout
            failure = failure_from_exception(err, provider)
            status, http_status, error_class = RequestStatus.UPSTREAM_ERROR, 502, failure.reason
            yield stream_error(f"upstream stream failed: {failure.message}")
        else:
            status, http_status = RequestStatus.UPSTREAM_ERROR, 504
            error_class = STREAM_DEADLINE
            yield stream_error(
                f"the upstream stream ran past its {provider.timeouts.stream_total:g} s deadline"
            )
    except MalformedReply:
        status, http_status = RequestStatus.UPSTREAM_ERROR, 502
        error_class = FailureReason.MALFORMED.value
        yield stream_error("the upstream sent a malformed chunk")
    except (httpx.HTTPError, OSError) as err:
        failure = failure_from_exception(err, provider)
        status, http_status, error_class = RequestStatus.UPSTREAM_ERROR, 502, failure.reason
        yield stream_error(f"upstream stream failed: {failure.message}")
    finally:
        on_end(status, http_status, error_class, parser)
        await response.aclose()


def relay_response(
    stream: AsyncIterator[bytes],
    ex: Exchange,
    on_abandon: Callable[[], None],
    headers: dict[str, str],
    **kwargs: Any,
) -> RelayResponse:
    return RelayResponse(
        stream,
        started=lambda: ex.relay_started,
        on_abandon=on_abandon,
        media_type="text/event-stream",
        headers=headers | {"cache-control": "no-cache"},
        **kwargs,
    )
