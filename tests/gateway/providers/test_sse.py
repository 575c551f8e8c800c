"""SSE framing: events split across network reads, comments, an unterminated last event."""

from __future__ import annotations

import json

from gateway.providers.sse import SSEDecoder, encode_event


def chunk(content: str | None = None, finish: str | None = None, usage=None) -> bytes:
    choices = [] if usage is not None and content is None else [
        {"index": 0, "delta": {"content": content} if content else {}, "finish_reason": finish}]
    body = {"id": "c1", "object": "chat.completion.chunk", "model": "deepseek-chat",
            "choices": choices}
    if usage is not None:
        body["usage"] = usage
    return json.dumps(body).encode()


def test_events_split_across_reads_are_reassembled():
    wire = b"data: " + chunk("Hel") + b"\n\n: keep-alive\n\ndata: " + chunk("lo") + b"\r\n\r\n"
    decoder = SSEDecoder()
    events = []
    for i in range(0, len(wire), 7):
        events.extend(decoder.feed(wire[i:i + 7]))
    events.extend(decoder.flush())
    assert [json.loads(e)["choices"][0]["delta"]["content"] for e in events] == ["Hel", "lo"]


def test_an_unterminated_last_event_is_flushed():
    decoder = SSEDecoder()
    assert list(decoder.feed(b"data: [DONE]")) == []
    assert list(decoder.flush()) == [b"[DONE]"]


def test_events_are_written_compact():
    assert encode_event({"a": 1, "b": [1, 2]}) == b'data: {"a":1,"b":[1,2]}\n\n'
    assert encode_event(b"[DONE]") == b"data: [DONE]\n\n"
