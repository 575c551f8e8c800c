"""Anthropic's answers and usage in our shapes: cache reads and writes are part of the
prompt, and a translated answer keeps every token class."""

from __future__ import annotations

from gateway.domain.pricing import TokenUsage
from gateway.providers.anthropic_replies import (
    anthropic_usage,
    completion_to_message,
    message_text,
    message_to_completion,
    openai_usage,
    usage_from_anthropic,
)

MESSAGE = {
    "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
    "content": [
        {"type": "thinking", "thinking": "Paris is in France.", "signature": "sig"},
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
    ],
    "stop_reason": "tool_use", "stop_sequence": None,
    "usage": {"input_tokens": 20, "cache_creation_input_tokens": 1500,
              "cache_read_input_tokens": 300, "output_tokens": 42},
}


def test_cache_tokens_are_inside_the_prompt_and_counted_by_class():
    assert usage_from_anthropic(MESSAGE["usage"]) == TokenUsage(
        prompt_tokens=1820, cached_prompt_tokens=300, cache_write_tokens=1500,
        completion_tokens=42)


def test_no_usage_or_a_broken_one_is_none_and_odd_counts_are_zero():
    assert usage_from_anthropic(None) is None
    assert usage_from_anthropic({"output_tokens": 3}) is None
    assert usage_from_anthropic({"input_tokens": 5, "cache_read_input_tokens": -1,
                                 "output_tokens": "7"}) == TokenUsage(prompt_tokens=5)


def test_usage_round_trips_between_the_shapes():
    usage = TokenUsage(prompt_tokens=1820, cached_prompt_tokens=300, cache_write_tokens=1500,
                       completion_tokens=42)
    assert usage_from_anthropic(anthropic_usage(usage)) == usage
    assert anthropic_usage(None) == {"input_tokens": 0, "output_tokens": 0}
    assert openai_usage(usage)["prompt_tokens_details"] == {"cached_tokens": 300,
                                                            "cache_write_tokens": 1500}


def test_a_message_becomes_a_chat_completion_with_its_tool_call_and_thinking():
    body = message_to_completion(MESSAGE)
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] == "Checking."
    assert choice["message"]["reasoning_content"] == "Paris is in France."
    assert choice["message"]["tool_calls"] == [{"id": "toolu_1", "type": "function", "function": {
        "name": "get_weather", "arguments": '{"city":"Paris"}'}}]
    assert body["usage"]["prompt_tokens"] == 1820
    assert body["usage"]["prompt_tokens_details"]["cached_tokens"] == 300


def test_stop_reasons_map_to_finish_reasons():
    for stop, finish in (("end_turn", "stop"), ("max_tokens", "length"),
                         ("stop_sequence", "stop"), ("refusal", "content_filter")):
        body = message_to_completion({**MESSAGE, "stop_reason": stop})
        assert body["choices"][0]["finish_reason"] == finish


def test_message_text_holds_text_tool_input_and_thinking():
    assert message_text(MESSAGE) == 'Paris is in France.Checking.{"city":"Paris"}'


def test_a_chat_completion_becomes_a_message():
    completion = {"id": "chatcmpl-9", "choices": [{"index": 0, "finish_reason": "tool_calls",
                  "message": {"role": "assistant", "content": "Sure.", "tool_calls": [
                      {"id": "call_1", "type": "function", "function": {
                          "name": "get_weather", "arguments": '{"city": "Rome"}'}}]}}]}
    usage = TokenUsage(prompt_tokens=50, cached_prompt_tokens=10, completion_tokens=7)
    message = completion_to_message(completion, usage, "claude-sonnet-4.5")
    assert message == {
        "id": "msg_chatcmpl-9", "type": "message", "role": "assistant",
        "model": "claude-sonnet-4.5",
        "content": [{"type": "text", "text": "Sure."},
                    {"type": "tool_use", "id": "call_1", "name": "get_weather",
                     "input": {"city": "Rome"}}],
        "stop_reason": "tool_use", "stop_sequence": None,
        "usage": {"input_tokens": 40, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": 10, "output_tokens": 7},
    }


def test_arguments_that_are_not_an_object_are_kept_not_lost():
    completion = {"id": "x", "choices": [{"finish_reason": "length", "message": {
        "content": None, "tool_calls": [{"id": "c", "function": {"name": "f",
                                                                  "arguments": '{"a": 1'}}]}}]}
    message = completion_to_message(completion, None, "m")
    assert message["content"][0]["input"] == {"arguments": '{"a": 1'}
    assert message["stop_reason"] == "max_tokens"
