"""SSE relay: framing across network reads, model rewriting, the hidden usage chunk."""

from __future__ import annotations

import json

import pytest

from gateway.providers.sse import MalformedChunk, SSEDecoder, StreamTally, rewrite_chunk


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


def test_chunks_carry_the_requested_name_and_the_text_is_tallied():
    tally = StreamTally()
    out = rewrite_chunk(chunk("Hi"), public_model="auto", tally=tally, include_usage=False)
    assert json.loads(out[6:])["model"] == "auto"
    rewrite_chunk(chunk(None, finish="stop"), public_model="auto", tally=tally,
                  include_usage=False)
    assert tally.text() == "Hi" and tally.finished


@pytest.mark.parametrize("include_usage", [False, True])
def test_the_usage_chunk_is_kept_for_the_ledger_and_shown_only_if_asked(include_usage):
    tally = StreamTally()
    usage = {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
    out = rewrite_chunk(chunk(usage=usage), public_model="auto", tally=tally,
                        include_usage=include_usage)
    assert tally.usage == usage
    assert (out is not None) is include_usage


def test_done_and_malformed_chunks():
    tally = StreamTally()
    assert rewrite_chunk(b"[DONE]", public_model="m", tally=tally,
                         include_usage=False) == b"data: [DONE]\n\n"
    with pytest.raises(MalformedChunk):
        rewrite_chunk(b"{broken", public_model="m", tally=tally, include_usage=False)
    with pytest.raises(MalformedChunk):
        rewrite_chunk(b"[1]", public_model="m", tally=tally, include_usage=False)
