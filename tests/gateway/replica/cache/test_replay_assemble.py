"""One entry for plain and streamed answers: a plain answer as its API's stream events, and
the events assembled back to the same answer, for each API that streams."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.domain.endpoints import Endpoint
from gateway.replica.cache.assemble import as_body
from gateway.replica.cache.replay import as_events, pieces

TEXT = "The quick brown fox jumps over the lazy dog, twice over again."
CHAT_USAGE = {"prompt_tokens": 9, "completion_tokens": 14, "total_tokens": 23}

CHAT = {
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": TEXT, "refusal": None},
         "logprobs": None, "finish_reason": "stop"},
        {"index": 1, "message": {
            "role": "assistant", "content": None, "refusal": None,
            "tool_calls": [{"id": "call_1", "type": "function",
                            "function": {"name": "f", "arguments": '{"a":1}'}}]},
         "logprobs": None, "finish_reason": "tool_calls"},
    ],
    "usage": CHAT_USAGE,
}
COMPLETION = {
    "id": "cmpl-1", "object": "text_completion", "created": 1, "model": "m",
    "choices": [{"text": TEXT, "index": 0, "logprobs": None, "finish_reason": "length"}],
    "usage": CHAT_USAGE,
}
RESPONSE = {
    "id": "resp_1", "object": "response", "created_at": 1, "model": "m", "status": "completed",
    "output": [
        {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
         "content": [{"type": "output_text", "text": TEXT, "annotations": []}]},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f",
         "arguments": '{"a":1}', "status": "completed"},
    ],
    "usage": {"input_tokens": 9, "output_tokens": 14, "total_tokens": 23},
}
MESSAGE = {
    "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
    "content": [
        {"type": "thinking", "thinking": "Let me think about it.", "signature": "sig"},
        {"type": "text", "text": TEXT},
        {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": [1, 2]}},
    ],
    "stop_reason": "tool_use", "stop_sequence": None,
    "usage": {"input_tokens": 9, "output_tokens": 14, "cache_read_input_tokens": 0},
}


def test_text_is_cut_in_pieces_that_join_back_to_it() -> None:
    parts = list(pieces(TEXT))
    assert len(parts) > 2 and "".join(parts) == TEXT
    assert list(pieces("")) == []


@pytest.mark.parametrize(("endpoint", "body"), [
    (Endpoint.CHAT_COMPLETIONS, CHAT), (Endpoint.COMPLETIONS, COMPLETION),
    (Endpoint.RESPONSES, RESPONSE), (Endpoint.MESSAGES, MESSAGE),
])
def test_a_plain_answer_streamed_assembles_back_to_itself(
    endpoint: Endpoint, body: dict[str, Any]
) -> None:
    events = as_events(endpoint, body)
    assert len(events) >= 5  # in pieces, never one chunk
    assert as_body(endpoint, events, "m") == body


def test_chat_chunks_end_with_the_usage_chunk_and_say_their_object() -> None:
    events = as_events(Endpoint.CHAT_COMPLETIONS, CHAT)
    assert {e["object"] for e in events} == {"chat.completion.chunk"}
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert events[-1]["choices"] == [] and events[-1]["usage"] == CHAT_USAGE
    assert events[-2]["choices"][0]["finish_reason"] == "tool_calls"


def test_responses_and_messages_events_come_in_their_apis_order() -> None:
    kinds = [e["type"] for e in as_events(Endpoint.RESPONSES, RESPONSE)]
    assert kinds[:3] == ["response.created", "response.in_progress",
                         "response.output_item.added"]
    assert kinds[-1] == "response.completed" and "response.output_text.delta" in kinds
    assert [e["sequence_number"] for e in as_events(Endpoint.RESPONSES, RESPONSE)] == list(
        range(len(kinds)))
    names = [e["type"] for e in as_events(Endpoint.MESSAGES, MESSAGE)]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    assert names.count("content_block_start") == names.count("content_block_stop") == 3


def test_a_stream_assembles_into_the_plain_answer_with_the_asked_model() -> None:
    chunks = [
        {"id": "c", "object": "chat.completion.chunk", "created": 2, "model": "upstream-m",
         "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
        {"id": "c", "object": "chat.completion.chunk", "created": 2, "model": "upstream-m",
         "choices": [{"index": 0, "delta": {"content": "Hel"}}]},
        {"id": "c", "object": "chat.completion.chunk", "created": 2, "model": "upstream-m",
         "choices": [{"index": 0, "delta": {"content": "lo"}, "finish_reason": "stop"}]},
        {"id": "c", "object": "chat.completion.chunk", "created": 2, "model": "upstream-m",
         "choices": [], "usage": CHAT_USAGE},
    ]
    body = as_body(Endpoint.CHAT_COMPLETIONS, chunks, "asked")
    assert body["model"] == "asked" and body["object"] == "chat.completion"
    assert body["choices"][0]["message"]["content"] == "Hello"
    assert body["choices"][0]["finish_reason"] == "stop" and body["usage"] == CHAT_USAGE
