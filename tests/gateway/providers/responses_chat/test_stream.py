"""Chat answers and streams as Responses: items in order, numbered events, the terminal
event with the whole Response and its usage."""

from __future__ import annotations

import json
from typing import Any

from gateway.domain.pricing import TokenUsage
from gateway.providers.openai import OpenAIStreamParser
from gateway.providers.responses_chat.replies import completion_to_response, responses_usage
from gateway.providers.responses_chat.stream import ChatToResponsesStream

USAGE = TokenUsage(prompt_tokens=300, cached_prompt_tokens=128, completion_tokens=40,
                   reasoning_tokens=10)


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None,
          usage: dict[str, Any] | None = None) -> bytes:
    body: dict[str, Any] = {"id": "g1", "model": "gemini-2.5-flash", "choices": [] if delta
                            is None else [{"index": 0, "delta": delta,
                                           "finish_reason": finish}]}
    if usage:
        body["usage"] = usage
    return json.dumps(body).encode()


def test_usage_keeps_cached_and_reasoning_inside_the_totals():
    assert responses_usage(USAGE) == {
        "input_tokens": 300, "input_tokens_details": {"cached_tokens": 128},
        "output_tokens": 40, "output_tokens_details": {"reasoning_tokens": 10},
        "total_tokens": 340}


def test_a_completion_becomes_a_response_with_a_message_and_a_call():
    completion = {"id": "g1", "model": "gemini-2.5-flash", "choices": [{
        "finish_reason": "tool_calls", "message": {"content": "Checking.", "tool_calls": [
            {"id": "call_1", "function": {"name": "f", "arguments": "{\"a\":1}"}}]}}]}
    body = completion_to_response(completion, USAGE)
    assert body["id"] == "resp_g1" and body["status"] == "completed"
    assert body["output"][0]["content"][0] == {"type": "output_text", "text": "Checking.",
                                               "annotations": []}
    assert body["output"][1] == {"type": "function_call", "id": "fc_g1_0", "call_id": "call_1",
                                 "name": "f", "arguments": "{\"a\":1}", "status": "completed"}
    assert body["usage"]["input_tokens"] == 300
    cut = completion_to_response({**completion, "choices": [{"finish_reason": "length",
                                                             "message": {"content": "x"}}]},
                                 None)
    assert cut["status"] == "incomplete"
    assert cut["incomplete_details"] == {"reason": "max_output_tokens"}


def test_a_stream_becomes_numbered_events_ending_in_completed():
    parser = ChatToResponsesStream(OpenAIStreamParser())
    payloads = [
        chunk({"role": "assistant", "content": "Hel"}), chunk({"content": "lo"}),
        chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                               "function": {"name": "f", "arguments": "{\"a\""}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": ":1}"}}]}),
        chunk({}, "tool_calls"),
        chunk(None, usage={"prompt_tokens": 30, "completion_tokens": 9}),
        b"[DONE]",
    ]
    events = [e for p in payloads for e in parser.feed(p)]
    kinds = [e["type"] for e in events]
    assert kinds == [
        "response.created", "response.in_progress",
        "response.output_item.added", "response.content_part.added",
        "response.output_text.delta", "response.output_text.delta",
        "response.output_text.done", "response.content_part.done", "response.output_item.done",
        "response.output_item.added", "response.function_call_arguments.delta",
        "response.function_call_arguments.delta", "response.function_call_arguments.done",
        "response.output_item.done", "response.completed"]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert events[6]["text"] == "Hello"
    assert events[12]["arguments"] == "{\"a\":1}"
    final = events[-1]["response"]
    assert final["status"] == "completed" and final["id"] == "resp_g1"
    assert [item["type"] for item in final["output"]] == ["message", "function_call"]
    assert final["usage"]["input_tokens"] == 30 and final["usage"]["output_tokens"] == 9
    assert events[0]["response"]["usage"] is None and parser.done
    assert parser.close() == []


def test_a_stream_cut_at_the_limit_ends_incomplete():
    parser = ChatToResponsesStream(OpenAIStreamParser())
    events = [e for p in (chunk({"content": "x"}), chunk({}, "length"), b"[DONE]")
              for e in parser.feed(p)]
    assert events[-1]["type"] == "response.incomplete"
    assert events[-1]["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
