"""Relaying a Messages stream to the client, event by event, never buffered.

The events come from a `MessagesStream`: the native Anthropic parser (events as they
came) or the translation of a chat stream. Each is written with its `event:` name, as
Anthropic does; the model is the one the client asked for. How the stream ends (done, an
upstream failure, the client leaving) is reported once, like the chat relay
(`gateway.replica.stream_relay`), and the upstream response is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any, Protocol

import httpx

from gateway.domain.config import Provider
from gateway.domain.usage_record import RequestStatus
from gateway.providers.adapter import MalformedReply, StreamParser
from gateway.providers.anthropic_stream import UpstreamStreamError
from gateway.providers.client import failure_from_exception
from gateway.providers.sse import SSEDecoder
from gateway.replica.exchange import Exchange
from gateway.replica.messages.errors import stream_error_event
from gateway.replica.stream_relay import DRAIN_TIMEOUT_S, STREAM_DEADLINE, ClientFormat, Outcome
from gateway.routing.retry_policy import FailureReason

_SEPARATORS = (",", ":")


class MessagesStream(StreamParser, Protocol):
    def close(self) -> list[dict[str, Any]]:
        """The closing events of a stream whose upstream ended without its own."""
        ...


def encode(event: dict[str, Any]) -> bytes:
    return (f"event: {event.get('type', 'message')}\n"
            f"data: {json.dumps(event, separators=_SEPARATORS)}\n\n").encode()


def client_event(event: dict[str, Any], public_model: str) -> bytes:
    if event.get("type") == "message_start" and isinstance(event.get("message"), dict):
        event["message"]["model"] = public_model
    return encode(event)


def _error(message: str) -> bytes:
    return encode(stream_error_event(message))


# Messages streams: named events, usage always in them (Anthropic's streams carry it),
# no closing line after `message_stop`; the response cache replays stored events with it
MESSAGES_FORMAT = ClientFormat(
    encode=lambda event, model, _usage: client_event(event, model), done=None, error=_error
)


async def _drain(raw: AsyncIterator[bytes]) -> None:
    with contextlib.suppress(Exception):
        async with asyncio.timeout(DRAIN_TIMEOUT_S):
            async for _ in raw:
                pass


async def relay_messages(
    ex: Exchange,
    response: httpx.Response,
    raw: AsyncIterator[bytes],
    decoder: SSEDecoder,
    first: list[bytes],
    parser: MessagesStream,
    provider: Provider,
    on_end: Outcome,
    fmt: ClientFormat = MESSAGES_FORMAT,
) -> AsyncIterator[bytes]:
    ex.relay_started = True
    public_model = ex.requested
    loop = asyncio.get_running_loop()
    deadline = loop.time() + provider.timeouts.stream_total
    status, http_status = RequestStatus.CANCELLED, 200
    error_class: str | None = "client_disconnected"
    try:
        pending, done = first, False
        while True:
            for payload in pending:
                events = parser.feed(payload)
                done = parser.done
                if done:
                    status, error_class = RequestStatus.OK, None
                for event in events:
                    if ex.ttft_ms is None:
                        ex.ttft_ms = ex.elapsed_ms()
                    out = fmt.encode(event, public_model, True)
                    if out is not None:
                        yield out
                if done:
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
            for event in parser.close():
                out = fmt.encode(event, public_model, True)
                if out is not None:
                    yield out
        else:
            status, http_status = RequestStatus.UPSTREAM_ERROR, 502
            error_class = FailureReason.RESET.value
            yield encode(stream_error_event("the upstream stream ended early"))
    except TimeoutError as err:
        if loop.time() < deadline:
            failure = failure_from_exception(err, provider)
            status, http_status, error_class = RequestStatus.UPSTREAM_ERROR, 502, failure.reason
            yield encode(stream_error_event(f"upstream stream failed: {failure.message}"))
        else:
            status, http_status, error_class = RequestStatus.UPSTREAM_ERROR, 504, STREAM_DEADLINE
            yield encode(stream_error_event(
                f"the upstream stream ran past its {provider.timeouts.stream_total:g} s deadline",
                "timeout_error"))
    except UpstreamStreamError as err:
        # Anthropic's own error event: the client gets it as Anthropic sent it
        status, http_status = RequestStatus.UPSTREAM_ERROR, 502
        error_class = FailureReason.UPSTREAM_5XX.value
        yield encode(err.event)
    except MalformedReply:
        status, http_status = RequestStatus.UPSTREAM_ERROR, 502
        error_class = FailureReason.MALFORMED.value
        yield encode(stream_error_event("the upstream sent a malformed event"))
    except (httpx.HTTPError, OSError) as err:
        failure = failure_from_exception(err, provider)
        status, http_status, error_class = RequestStatus.UPSTREAM_ERROR, 502, failure.reason
        yield encode(stream_error_event(f"upstream stream failed: {failure.message}"))
    finally:
        on_end(status, http_status, error_class, parser)
        await response.aclose()
