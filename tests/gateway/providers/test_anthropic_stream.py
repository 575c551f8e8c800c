"""Anthropic's stream read natively and as chat chunks: cumulative usage (the last value
wins, never a sum), tool input deltas, the end, and broken events."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.domain.pricing import TokenUsage
from gateway.providers.adapter import MalformedReply
from gateway.providers.anthropic_stream import AnthropicChatStream, AnthropicEventStream


def ev(**event: Any) -> bytes:
    return json.dumps(event).encode()


START = ev(type="message_start", message={
    "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
    "content": [], "usage": {"input_tokens": 25, "cache_creation_input_tokens": 1200,
                             "cache_read_input_tokens": 0, "output_tokens": 1}})
TOOL_STREAM = [
    START,
    ev(type="content_block_start", index=0, content_block={"type": "text", "text": ""}),
    ev(type="ping"),
    ev(type="content_block_delta", index=0, delta={"type": "text_delta", "text": "Let me "}),
    ev(type="content_block_delta", index=0, delta={"type": "text_delta", "text": "check."}),
    ev(type="content_block_stop", index=0),
    ev(type="content_block_start", index=1, content_block={
        "type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}),
    ev(type="content_block_delta", index=1, delta={"type": "input_json_delta",
                                                   "partial_json": '{"city":'}),
    ev(type="content_block_delta", index=1, delta={"type": "input_json_delta",
                                                   "partial_json": '"Paris"}'}),
    ev(type="content_block_stop", index=1),
    ev(type="message_delta", delta={"stop_reason": "tool_use", "stop_sequence": None},
       usage={"output_tokens": 10}),
    ev(type="message_delta", delta={}, usage={"output_tokens": 31}),
    ev(type="message_stop"),
]


def test_native_events_pass_on_and_usage_is_the_last_cumulative_count():
    parser = AnthropicEventStream()
    out = [e for payload in TOOL_STREAM for e in parser.feed(payload)]
    assert [e["type"] for e in out][:3] == ["message_start", "content_block_start",
                                            "content_block_delta"]  # ping left out
    assert len(out) == len(TOOL_STREAM) - 1
    assert parser.done and parser.finished
    assert parser.usage == TokenUsage(prompt_tokens=1225, cache_write_tokens=1200,
                                      completion_tokens=31)
    assert parser.text() == 'Let me check.{"city":"Paris"}'
    assert parser.close() == []


def test_a_message_delta_with_input_counts_replaces_them_field_by_field():
    parser = AnthropicEventStream()
    parser.feed(START)
    parser.feed(ev(type="message_delta", delta={"stop_reason": "end_turn"},
                   usage={"input_tokens": 30, "cache_read_input_tokens": 1200,
                          "cache_creation_input_tokens": 0, "output_tokens": 5}))
    assert parser.usage == TokenUsage(prompt_tokens=1230, cached_prompt_tokens=1200,
                                      completion_tokens=5)
    assert parser.finished and not parser.done


def test_as_chat_chunks_with_a_tool_call_a_finish_and_the_usage_chunk():
    parser = AnthropicChatStream()
    chunks = [c for payload in TOOL_STREAM for c in parser.feed(payload)]
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert deltas[0] == {"role": "assistant", "content": ""}
    assert "".join(d.get("content", "") for d in deltas) == "Let me check."
    calls = [tc for d in deltas for tc in d.get("tool_calls", ())]
    assert calls[0] == {"index": 0, "id": "toolu_1", "type": "function",
                        "function": {"name": "get_weather", "arguments": ""}}
    assert "".join(tc["function"]["arguments"] for tc in calls) == '{"city":"Paris"}'
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finishes.count("tool_calls") == 1
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["prompt_tokens"] == 1225
    assert chunks[-1]["usage"]["completion_tokens"] == 31
    assert all(c["id"] == "msg_1" and c["model"] == "claude-sonnet-4-5" for c in chunks)
    assert parser.done


def test_thinking_deltas_become_reasoning_content():
    parser = AnthropicChatStream()
    parser.feed(START)
    parser.feed(ev(type="content_block_start", index=0,
                   content_block={"type": "thinking", "thinking": ""}))
    out = parser.feed(ev(type="content_block_delta", index=0,
                         delta={"type": "thinking_delta", "thinking": "hmm"}))
    assert out[0]["choices"][0]["delta"] == {"reasoning_content": "hmm"}
    assert parser.feed(ev(type="content_block_delta", index=0,
                          delta={"type": "signature_delta", "signature": "x"})) == []


@pytest.mark.parametrize("payload", [
    b"not json",
    b'{"no": "type"}',
    ev(type="error", error={"type": "overloaded_error", "message": "Overloaded"}),
])
def test_broken_events_and_error_events_are_malformed(payload):
    for parser in (AnthropicEventStream(), AnthropicChatStream()):
        with pytest.raises(MalformedReply):
            parser.feed(payload)


def test_tool_input_for_a_block_that_is_no_tool_is_malformed():
    parser = AnthropicChatStream()
    parser.feed(START)
    with pytest.raises(MalformedReply):
        parser.feed(ev(type="content_block_delta", index=3,
                       delta={"type": "input_json_delta", "partial_json": "{}"}))
