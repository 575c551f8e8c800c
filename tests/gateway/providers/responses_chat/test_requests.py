"""A Responses body as chat: input items one to one, tools, formats; OpenAI-only features
refused with a 400 naming them."""

from __future__ import annotations

import pytest

from gateway.providers.responses_chat.requests import responses_to_chat
from gateway.providers.translation import Untranslatable


def test_instructions_and_a_string_input():
    out = responses_to_chat({"model": "m", "instructions": "Be brief.", "input": "Hi",
                             "max_output_tokens": 50, "temperature": 0.2, "store": True})
    assert out == {"model": "m", "max_tokens": 50, "temperature": 0.2, "messages": [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]}


def test_items_messages_calls_and_outputs():
    body = {"model": "m", "stream": True, "tool_choice": {"type": "function", "name": "f"},
            "tools": [{"type": "function", "name": "f", "description": "d",
                       "parameters": {"type": "object"}, "strict": True}],
            "text": {"format": {"type": "json_schema", "name": "out",
                                "schema": {"type": "object"}, "strict": True}},
            "input": [
                {"role": "developer", "content": "Rules."},
                {"type": "message", "role": "user", "content": [
                    {"type": "input_text", "text": "Look: "},
                    {"type": "input_image", "image_url": "data:image/png;base64,AA"}]},
                {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
                {"type": "function_call", "call_id": "c2", "name": "f", "arguments": "{\"a\":1}"},
                {"type": "function_call_output", "call_id": "c1", "output": "one"},
                {"type": "function_call_output", "call_id": "c2", "output": "two"},
            ]}
    out = responses_to_chat(body)
    assert out["messages"] == [
        {"role": "developer", "content": "Rules."},
        {"role": "user", "content": [{"type": "text", "text": "Look: "},
                                     {"type": "image_url",
                                      "image_url": {"url": "data:image/png;base64,AA"}}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "f",
                                                          "arguments": "{\"a\":1}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "one"},
        {"role": "tool", "tool_call_id": "c2", "content": "two"},
    ]
    assert out["tools"] == [{"type": "function", "function": {
        "name": "f", "parameters": {"type": "object"}, "description": "d"}}]
    assert out["tool_choice"] == {"type": "function", "function": {"name": "f"}}
    assert out["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "out", "schema": {"type": "object"}, "strict": True}}
    assert out["stream"] is True and out["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize(("extra", "named"), [
    ({"previous_response_id": "resp_1"}, "`previous_response_id`"),
    ({"reasoning": {"effort": "high"}}, "`reasoning`"),
    ({"tools": [{"type": "web_search"}]}, "web_search"),
    ({"input": [{"type": "reasoning", "summary": []}]}, "reasoning"),
    ({"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]},
     "input_file"),
    ({"text": {"format": {"type": "grammar"}}}, "grammar"),
])
def test_openai_only_features_are_a_400_naming_them(extra, named):
    with pytest.raises(Untranslatable) as caught:
        responses_to_chat({"model": "m", "input": "x", **extra})
    assert named in caught.value.message and caught.value.status == 400


def test_the_end_users_newer_name_reaches_a_chat_upstream_as_user():
    base = {"model": "m", "input": "Hi"}
    assert responses_to_chat(base | {"safety_identifier": "u-1"})["user"] == "u-1"
    both = responses_to_chat(base | {"safety_identifier": "u-1", "user": "u-2"})
    assert both["user"] == "u-2" and "safety_identifier" not in both
