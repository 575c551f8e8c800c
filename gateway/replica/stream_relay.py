"""Relaying an upstream SSE stream to the client as it arrives, never buffered.

One pump (`relay`) serves every API's stream: the provider's stream parser
(`gateway.providers.adapter.StreamParser`) turns each upstream event into the API's
events, and the API's `ClientFormat` writes them for the client (the model it asked for,
usage only if it asked). The first token (text or tool arguments) goes to the client as
soon as it is encoded, with the events before it; after it, what one network read of the
upstream carried goes in one write (one pass through Serve's and uvicorn's send, not one
per event), and no event waits for a later read. Whatever way the stream ends (done,
upstream failure, or the client going away, which arrives as a CancelledError at a
`yield`) it reports the outcome once, after the last bytes are written, and closes the
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

from gateway.domain.config import Provider
from gateway.domain.usage_record import RequestStatus
from gateway.providers.adapter import MalformedReply, StreamParser
from gateway.providers.anthropic_stream import UpstreamStreamError
from gateway.providers.client import UpstreamFailure, failure_from_exception, malformed
from gateway.providers.sse import DONE, SSEDecoder, encode_event
from gateway.replica.exchange import Exchange
from gateway.routing.retry_policy import FailureReason

DRAIN_TIMEOUT_S = 1.0
# the ledger's error class of a stream cut at its overall deadline
STREAM_DEADLINE = "stream_deadline"

# status, http status, error class, parser: how the stream ended and what it carried
Outcome = Callable[[RequestStatus, int, str | None, StreamParser], None]


class RelayResponse(StreamingResponse):
    """A stream whose clean-up runs even if the client leaves before it starts.

    An async generator that never started never runs its `finally`, which would leave
    the upstream connection open and the request unrecorded.

    The client leaving is watched by one plain task that awaits `receive` and cancels
    the stream's own task (as Starlette does for ASGI before 2.4, which uvicorn speaks,
    but without an anyio task group and a second task per stream): the relay then sees
    a CancelledError at its `yield`, as before.
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
            await self._stream(receive, send)
        finally:
            if not self._started():
                self._on_abandon()

    async def _stream(self, receive: Any, send: Any) -> None:
        streaming = asyncio.current_task()
        assert streaming is not None
        left = False

        async def watch() -> None:
            nonlocal left
            while (await receive())["type"] != "http.disconnect":
                pass
            left = True
            streaming.cancel()

        watcher = asyncio.get_running_loop().create_task(watch())
        try:
            await send({"type": "http.response.start", "status": self.status_code,
                        "headers": self.raw_headers})  # fmt: skip
            async for chunk in self.body_iterator:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except asyncio.CancelledError:
            if not left:
                raise  # not the client: the server's own cancellation goes on
            streaming.uncancel()
        finally:
            watcher.cancel()
            # a relay left at a `yield` (the client went during a write) ends now, its
            # outcome reported, rather than whenever the loop finalizes it
            aclose = getattr(self.body_iterator, "aclose", None)
            if aclose is not None:
                await aclose()


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


@dataclasses.dataclass(frozen=True, slots=True)
class ClientFormat:
    """How one API's relayed events are written for its client: each event (None: send
    nothing), the stream's closing event if it has one, and an error once bytes are out.

    Messages streams add three things of Anthropic's: the closing events of a stream whose
    upstream ended without its own (`closes`: the parser's `close()`), a deadline error of
    its own kind, and the upstream's own error event passed on as it came."""

    encode: Callable[[dict[str, Any], str, bool], bytes | None]  # event, model, usage?
    done: bytes | None
    error: Callable[[str], bytes]
    closes: bool = False
    deadline_error: Callable[[str], bytes] | None = None
    upstream_error: Callable[[dict[str, Any]], bytes] | None = None
    malformed: str = "the upstream sent a malformed chunk"


# chat completions and legacy completions: `data:` chunks, closed by [DONE]
CHAT_FORMAT = ClientFormat(
    encode=lambda chunk, model, usage: client_chunk(
        chunk, public_model=model, include_usage=usage
    ),
    done=encode_event(DONE),
    error=stream_error,
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
    fmt: ClientFormat = CHAT_FORMAT,
) -> AsyncIterator[bytes]:
    """The one pump of every API's stream (chat, legacy completions, Responses, Messages)."""
    assert ex.request is not None
    ex.relay_started = True
    include_usage = ex.request.include_usage
    public_model = ex.requested
    encode = fmt.encode
    # the whole stream's deadline, from the first event on (the headers had their own)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + provider.timeouts.stream_total
    status, http_status = RequestStatus.CANCELLED, 200
    error_class: str | None = "client_disconnected"
    try:
        pending = first
        done = False
        while True:
            out: list[bytes] = []  # what this read carried: one write to the client
            for payload in pending:
                events = parser.feed(payload)
                done = parser.done
                if done:
                    # the outcome is settled before the last event leaves: a client
                    # that hangs up right after [DONE] did not cancel anything
                    status, error_class = RequestStatus.OK, None
                for event in events:
                    data = encode(event, public_model, include_usage)
                    if data is None:
                        continue
                    out.append(data)
                if ex.ttft_ms is None and out and parser.text():
                    # the first token (text or tool arguments), with the events before
                    # it, leaves before the rest of its read is encoded: an upstream that
                    # sends a whole answer in one read (a cache, a fast model) made the
                    # client wait for every event's encoding. Checked once all that one
                    # upstream event became is encoded: a chat chunk translated to
                    # Messages opens a text block before its delta
                    ex.ttft_ms = ex.elapsed_ms()
                    yield out[0] if len(out) == 1 else b"".join(out)
                    out = []
                if done:
                    if fmt.done is not None:
                        out.append(fmt.done)
                    break
            if out:
                yield out[0] if len(out) == 1 else b"".join(out)
            if done:
                if ex.ttft_ms is None:
                    ex.ttft_ms = ex.elapsed_ms()
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
            close = getattr(parser, "close", None) if fmt.closes else None
            if close is not None:
                closing = [encode(e, public_model, include_usage) for e in close()]
                if any(closing):
                    yield b"".join(c for c in closing if c is not None)
        else:
            status, http_status = RequestStatus.UPSTREAM_ERROR, 502
            error_class = FailureReason.RESET.value
            yield fmt.error("the upstream stream ended early")
    except TimeoutError as err:
        if loop.time() < deadline:  # not ours: a transport's own timeout
            failure = failure_from_exception(err, provider)
            status, http_status, error_class = RequestStatus.UPSTREAM_ERROR, 502, failure.reason
            yield fmt.error(f"upstream stream failed: {failure.message}")
        else:
            status, http_status = RequestStatus.UPSTREAM_ERROR, 504
            error_class = STREAM_DEADLINE
            message = (f"the upstream stream ran past its "
                       f"{provider.timeouts.stream_total:g} s deadline")  # fmt: skip
            yield (fmt.deadline_error or fmt.error)(message)
    except UpstreamStreamError as err:
        status, http_status = RequestStatus.UPSTREAM_ERROR, 502
        if fmt.upstream_error is not None:
            # Anthropic's own error event: a Messages client gets it as Anthropic sent it
            error_class = FailureReason.UPSTREAM_5XX.value
            yield fmt.upstream_error(err.event)
        else:
            error_class = FailureReason.MALFORMED.value
            yield fmt.error(fmt.malformed)
    except MalformedReply:
        status, http_status = RequestStatus.UPSTREAM_ERROR, 502
        error_class = FailureReason.MALFORMED.value
        yield fmt.error(fmt.malformed)
    except (httpx.HTTPError, OSError) as err:
        failure = failure_from_exception(err, provider)
        status, http_status, error_class = RequestStatus.UPSTREAM_ERROR, 502, failure.reason
        yield fmt.error(f"upstream stream failed: {failure.message}")
    finally:
        # the ledger's work (pricing, the record, its journal line) runs here, once the
        # answer's last event ([DONE], message_stop) has been written to the client
        on_end(status, http_status, error_class, parser)
        await response.aclose()


@dataclasses.dataclass(frozen=True, slots=True)
class OpenedStream:
    """A stream that answered 200 and whose first event arrived: from here on, bytes go
    to the client and the attempt can no longer move to another model."""

    response: httpx.Response
    raw: AsyncIterator[bytes]
    decoder: SSEDecoder
    first: list[bytes]


async def read_first_event(response: httpx.Response, provider: Provider) -> OpenedStream:
    """Read up to the first event before answering 200: until a byte reaches the client,
    a reset or a broken first chunk can still be retried elsewhere."""
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
