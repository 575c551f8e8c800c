"""The relay's writes: when the first token leaves, and what one upstream read becomes."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx

from gateway.domain.config import Provider
from gateway.providers.adapter import StreamParser
from gateway.providers.openai import OpenAIStreamParser
from gateway.providers.sse import SSEDecoder
from gateway.replica.auth import Caller
from gateway.replica.chat_request import validate_chat_request
from gateway.replica.exchange import Exchange
from gateway.replica.stream_relay import CHAT_FORMAT, ClientFormat, relay

PROVIDER = Provider(name="sim", base_url="http://127.0.0.1:1/v1")


def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    body = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "up",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(body)}\n\n".encode()


def exchange() -> Exchange:
    ex = Exchange(request_id=uuid.uuid4(), started=0.0, started_at=dt.datetime.now(dt.UTC),
                  caller=Caller(app="t", team=None, key_id=None), requested="gpt-4o-mini")
    ex.request = validate_chat_request(
        {"model": "gpt-4o-mini", "stream": True, "messages": [{"role": "user", "content": "hi"}]})
    return ex


async def writes(reads: list[bytes], parser: StreamParser | None = None,
                 fmt: ClientFormat = CHAT_FORMAT) -> tuple[list[bytes], Exchange, list[Any]]:
    """What the client gets, write by write, when the upstream's bytes come in `reads`."""
    decoder = SSEDecoder()
    first = list(decoder.feed(reads[0]))

    async def rest() -> AsyncIterator[bytes]:
        for data in reads[1:]:
            yield data

    ended: list[Any] = []
    ex = exchange()
    out = [data async for data in relay(
        ex, httpx.Response(200), rest(), decoder, first, parser or OpenAIStreamParser(),
        PROVIDER, lambda *outcome: ended.append(outcome), fmt)]
    return out, ex, ended


async def test_a_whole_answer_in_one_read_sends_its_first_token_before_encoding_the_rest() -> None:
    tokens = [chunk({"content": f"w{i} "}) for i in range(20)]
    whole = chunk({"role": "assistant", "content": ""}) + b"".join(tokens) + \
        chunk({}, "stop") + b"data: [DONE]\n\n"
    out, ex, ended = await writes([whole])
    # the opening event and the first token leave together, first; the 19 other tokens,
    # the finish and [DONE] in the next write
    assert len(out) == 2
    assert b'"role":"assistant"' in out[0] and b"w0 " in out[0] and b"w1 " not in out[0]
    assert out[1].count(b"data: ") == 21 and out[1].endswith(b"data: [DONE]\n\n")
    assert ex.ttft_ms is not None
    assert [o[0].value for o in ended] == ["ok"]


async def test_events_before_the_first_token_do_not_wait_for_a_later_read() -> None:
    opening = chunk({"role": "assistant", "content": ""})
    out, ex, _ = await writes([opening, chunk({"content": "hello"}),
                               chunk({}, "stop") + b"data: [DONE]\n\n"])
    assert [o.count(b"data: ") for o in out] == [1, 1, 2]
    assert b'"role":"assistant"' in out[0] and b"hello" in out[1]


async def test_a_tool_call_is_a_first_token_too() -> None:
    call = {"tool_calls": [{"index": 0, "id": "t1", "type": "function",
                            "function": {"name": "f", "arguments": "{\"a\":"}}]}
    whole = chunk({"role": "assistant", "content": None}) + chunk(call) + \
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}) + \
        chunk({}, "tool_calls") + b"data: [DONE]\n\n"
    out, _, _ = await writes([whole])
    assert len(out) == 2 and b'{\\"a\\":' in out[0] and b"1}" not in out[0]


async def test_an_answer_without_a_token_still_ends_in_one_write_per_read() -> None:
    whole = chunk({"role": "assistant", "content": ""}) + chunk({}, "stop") + \
        b"data: [DONE]\n\n"
    out, ex, _ = await writes([whole])
    assert len(out) == 1 and out[0].endswith(b"data: [DONE]\n\n")
    assert ex.ttft_ms is not None


async def test_a_messages_stream_translated_from_chat_sends_its_first_text_delta_first() -> None:
    from gateway.providers.messages_stream import ChatToMessagesStream
    from gateway.replica.messages.relay import MESSAGES_FORMAT

    whole = chunk({"role": "assistant", "content": ""}) + \
        b"".join(chunk({"content": f"w{i} "}) for i in range(10)) + \
        chunk({}, "stop") + b"data: [DONE]\n\n"
    out, _, _ = await writes(
        [whole], ChatToMessagesStream(OpenAIStreamParser(), "gpt-4o-mini"), MESSAGES_FORMAT)
    # the chunk that carries "w0" opens the text block and deltas it: both leave with
    # message_start in the first write, the nine other deltas and the close after
    assert len(out) == 2
    assert [line for line in out[0].split(b"\n") if line.startswith(b"event: ")] == [
        b"event: message_start", b"event: content_block_start", b"event: content_block_delta"]
    assert b'"text":"w0 "' in out[0] and b"w1 " not in out[0]
    assert out[1].rstrip().endswith(b'data: {"type":"message_stop"}')
