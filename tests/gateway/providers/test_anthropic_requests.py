"""Request bodies between chat completions and Anthropic's Messages: what maps, and what
is refused with a 400 naming it rather than dropped."""

from __future__ import annotations

import json

import pytest

from gateway.providers.anthropic_requests import (
    DEFAULT_MAX_TOKENS,
    chat_to_messages,
    estimate_messages,
    messages_to_chat,
    system_text,
)
from gateway.providers.translation import Untranslatable

TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Weather.",
                                         "parameters": {"type": "object", "properties": {
                                             "city": {"type": "string"}}}}}


def test_a_chat_body_becomes_a_messages_body():
    body = {
        "model": "claude-sonnet-4.5", "max_tokens": 100, "temperature": 0.2, "top_p": 0.9,
        "stop": "END", "user": "u-1", "stream": True, "stream_options": {"include_usage": True},
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "developer", "content": [{"type": "text", "text": "Use metric."}]},
            {"role": "user", "content": "Weather in Paris?"},
        ],
    }
    out = chat_to_messages(body, "claude-sonnet-4-5")
    assert out == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 100,
        "system": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Use metric."}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]}],
        "stop_sequences": ["END"],
        "temperature": 0.2,
        "top_p": 0.9,
        "metadata": {"user_id": "u-1"},
        "stream": True,
    }


def test_max_tokens_defaults_and_takes_the_tighter_cap():
    messages = [{"role": "user", "content": "hi"}]
    assert chat_to_messages({"model": "m", "messages": messages}, "m")["max_tokens"] == \
        DEFAULT_MAX_TOKENS
    both = {"model": "m", "messages": messages, "max_tokens": 50, "max_completion_tokens": 30}
    assert chat_to_messages(both, "m")["max_tokens"] == 30


def test_tool_calls_and_their_results_become_tool_use_and_one_user_turn_of_results():
    body = {"model": "m", "tools": [TOOL], "tool_choice": "required",
            "parallel_tool_calls": False, "messages": [
                {"role": "user", "content": "Paris and Rome?"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}},
                    {"id": "call_2", "type": "function",
                     "function": {"name": "get_weather", "arguments": '{"city":"Rome"}'}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "18C"},
                {"role": "tool", "tool_call_id": "call_2", "content": "24C"},
            ]}
    out = chat_to_messages(body, "m")
    assert out["tools"] == [{"name": "get_weather", "description": "Weather.",
                             "input_schema": TOOL["function"]["parameters"]}]
    assert out["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    assert out["messages"][1] == {"role": "assistant", "content": [
        {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Paris"}},
        {"type": "tool_use", "id": "call_2", "name": "get_weather", "input": {"city": "Rome"}}]}
    assert out["messages"][2] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "call_1", "content": "18C"},
        {"type": "tool_result", "tool_use_id": "call_2", "content": "24C"}]}


@pytest.mark.parametrize(("choice", "expected"), [
    ("auto", {"type": "auto"}),
    ("none", {"type": "none"}),
    ({"type": "function", "function": {"name": "get_weather"}},
     {"type": "tool", "name": "get_weather"}),
])
def test_tool_choice_maps(choice, expected):
    body = {"model": "m", "tools": [TOOL], "tool_choice": choice,
            "messages": [{"role": "user", "content": "hi"}]}
    assert chat_to_messages(body, "m")["tool_choice"] == expected


def test_images_by_data_url_and_by_url():
    body = {"model": "m", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0K"}},
        {"type": "image_url", "image_url": {"url": "https://example.org/cat.jpg"}}]}]}
    blocks = chat_to_messages(body, "m")["messages"][0]["content"]
    assert blocks[1] == {"type": "image", "source": {"type": "base64",
                                                     "media_type": "image/png",
                                                     "data": "iVBORw0K"}}
    assert blocks[2] == {"type": "image", "source": {"type": "url",
                                                     "url": "https://example.org/cat.jpg"}}


@pytest.mark.parametrize(("extra", "named"), [
    ({"n": 2}, "`n`"),
    ({"logprobs": True}, "`logprobs`"),
    ({"response_format": {"type": "json_object"}}, "`response_format`"),
    ({"presence_penalty": 0.5}, "`presence_penalty`"),
    ({"some_new_field": 1}, "`some_new_field`"),
])
def test_what_anthropic_cannot_carry_is_a_400_naming_it(extra, named):
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], **extra}
    with pytest.raises(Untranslatable) as caught:
        chat_to_messages(body, "m")
    assert caught.value.status == 400
    assert named in caught.value.message
    assert "not supported on this route" in caught.value.message
    assert caught.value.code == "unsupported_on_route"


@pytest.mark.parametrize("message", [
    {"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]},
    {"role": "function", "name": "f", "content": "x"},
    {"role": "user", "content": [{"type": "image_url",
                                  "image_url": {"url": "data:image/png,raw"}}]},
])
def test_content_without_an_equivalent_is_refused(message):
    with pytest.raises(Untranslatable):
        chat_to_messages({"model": "m", "messages": [message]}, "m")


def test_a_system_message_after_the_conversation_started_is_refused():
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"},
                                       {"role": "system", "content": "late"}]}
    with pytest.raises(Untranslatable, match="system message"):
        chat_to_messages(body, "m")


def test_a_messages_body_becomes_a_chat_body():
    body = {
        "model": "gpt-4.1", "max_tokens": 64, "stop_sequences": ["END"], "temperature": 0.1,
        "metadata": {"user_id": "u-9"}, "stream": True,
        "system": [{"type": "text", "text": "Be brief.",
                    "cache_control": {"type": "ephemeral"}}],
        "tools": [{"name": "get_weather", "description": "Weather.",
                   "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "tool", "name": "get_weather",
                        "disable_parallel_tool_use": True},
        "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "s"},
                {"type": "text", "text": "Let me check."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                 "input": {"city": "Paris"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1",
                 "content": [{"type": "text", "text": "18C"}]},
                {"type": "text", "text": "And tomorrow?"}]},
        ],
    }
    out = messages_to_chat(body)
    assert out["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "Let me check.", "tool_calls": [
            {"id": "toolu_1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}]},
        {"role": "tool", "tool_call_id": "toolu_1", "content": "18C"},
        {"role": "user", "content": "And tomorrow?"},
    ]
    assert out["tools"] == [{"type": "function", "function": {
        "name": "get_weather", "parameters": {"type": "object"}, "description": "Weather."}}]
    assert out["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert out["parallel_tool_calls"] is False
    assert out["stop"] == ["END"] and out["user"] == "u-9" and out["stream"] is True
    assert out["max_tokens"] == 64 and out["temperature"] == 0.1


def test_an_image_block_becomes_an_image_url_part():
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                     "data": "AAAA"}},
        {"type": "text", "text": "what?"}]}]}
    assert messages_to_chat(body)["messages"][0]["content"] == [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        {"type": "text", "text": "what?"}]


@pytest.mark.parametrize(("extra", "named"), [
    ({"thinking": {"type": "enabled", "budget_tokens": 2000}}, "`thinking`"),
    ({"top_k": 5}, "`top_k`"),
    ({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "web_search"),
])
def test_what_chat_cannot_carry_is_a_400_naming_it(extra, named):
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}],
            **extra}
    with pytest.raises(Untranslatable) as caught:
        messages_to_chat(body)
    assert named in caught.value.message


def test_a_document_block_and_an_error_tool_result_are_refused():
    for block in ({"type": "document", "source": {"type": "text", "data": "x"}},
                  {"type": "tool_result", "tool_use_id": "t", "content": "boom",
                   "is_error": True}):
        body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user",
                                                             "content": [block]}]}
        with pytest.raises(Untranslatable):
            messages_to_chat(body)


def test_system_text_joins_blocks_and_estimates_see_every_block():
    assert system_text("plain") == "plain"
    assert system_text([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]) == "a\n\nb"
    estimate = estimate_messages({"system": "s", "messages": [
        {"role": "user", "content": [{"type": "text", "text": "hello"}]}]})
    assert estimate[0]["content"] == json.dumps("s")
    assert "hello" in estimate[1]["content"]


def test_the_end_user_reaches_anthropic_as_metadata_user_id_newer_name_first():
    base = {"model": "m", "messages": [{"role": "user", "content": "Hi"}]}
    assert chat_to_messages(base | {"user": "u-1"}, "m")["metadata"] == {"user_id": "u-1"}
    both = chat_to_messages(base | {"user": "u-1", "safety_identifier": "u-2"}, "m")
    assert both["metadata"] == {"user_id": "u-2"}
