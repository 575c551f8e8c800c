"""A chat stream as Anthropic's Messages stream: blocks opened and closed in order, tool
input as input_json_delta, and the whole usage in the closing message_delta."""

from __future__ import annotations

import json
from typing import Any

from gateway.providers.messages_stream import ChatToMessagesStream
from gateway.providers.openai import OpenAIStreamParser


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None,
          usage: dict[str, Any] | None = None) -> bytes:
    body: dict[str, Any] = {"id": "chatcmpl-7", "object": "chat.completion.chunk",
                            "model": "gpt-4.1",
                            "choices": [] if delta is None else [
                                {"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage is not None:
        body["usage"] = usage
    return json.dumps(body).encode()


STREAM = [
    chunk({"role": "assistant", "content": ""}),
    chunk({"content": "Let me "}),
    chunk({"content": "check."}),
    chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                           "function": {"name": "get_weather", "arguments": ""}}]}),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city":'}}]}),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]}),
    chunk({}, "tool_calls"),
    chunk(None, usage={"prompt_tokens": 300, "completion_tokens": 12,
                       "prompt_tokens_details": {"cached_tokens": 128}}),
    b"[DONE]",
]


def test_the_events_follow_anthropics_order():
    parser = ChatToMessagesStream(OpenAIStreamParser(), "claude-sonnet-4.5")
    events = [e for payload in STREAM for e in parser.feed(payload)]
    assert [e["type"] for e in events] == [
        "message_start",
        "content_block_start", "content_block_delta", "content_block_delta",
        "content_block_stop",
        "content_block_start", "content_block_delta", "content_block_delta",
        "content_block_stop",
        "message_delta", "message_stop",
    ]
    start = events[0]["message"]
    assert start["id"] == "msg_chatcmpl-7" and start["model"] == "claude-sonnet-4.5"
    assert events[1]["content_block"] == {"type": "text", "text": ""}
    assert events[5] == {"type": "content_block_start", "index": 1, "content_block": {
        "type": "tool_use", "id": "call_1", "name": "get_weather", "input": {}}}
    json_parts = [e["delta"]["partial_json"] for e in events[6:8]]
    assert json.loads("".join(json_parts)) == {"city": "Paris"}
    assert events[-2]["delta"]["stop_reason"] == "tool_use"
    assert events[-2]["usage"] == {"input_tokens": 172, "cache_creation_input_tokens": 0,
                                   "cache_read_input_tokens": 128, "output_tokens": 12}
    assert parser.done and parser.usage is not None and parser.usage.prompt_tokens == 300
    assert parser.close() == []  # once only


def test_a_stream_that_ends_without_done_is_closed_by_close():
    parser = ChatToMessagesStream(OpenAIStreamParser(), "m")
    events = [e for payload in STREAM[:3] for e in parser.feed(payload)]
    assert events[-1]["type"] == "content_block_delta"
    closing = parser.close()
    assert [e["type"] for e in closing] == ["content_block_stop", "message_delta",
                                            "message_stop"]
    assert closing[1]["delta"]["stop_reason"] == "end_turn"
    assert closing[1]["usage"] == {"input_tokens": 0, "output_tokens": 0}


def test_length_maps_to_max_tokens_and_other_choices_are_ignored():
    parser = ChatToMessagesStream(OpenAIStreamParser(), "m")
    other = json.dumps({"id": "c", "choices": [{"index": 1, "delta": {"content": "x"}}]})
    events = [e for payload in (chunk({"content": "a"}), other.encode(), chunk({}, "length"),
                                b"[DONE]") for e in parser.feed(payload)]
    texts = [e["delta"]["text"] for e in events if e["type"] == "content_block_delta"]
    assert texts == ["a"]
    assert events[-2]["delta"]["stop_reason"] == "max_tokens"
