"""The Anthropic adapter: native requests with Anthropic's headers, chat translated, and
Anthropic's errors read into the shape the request path passes on."""

from __future__ import annotations

import json

import pytest

from gateway.domain.config import Provider
from gateway.domain.endpoints import Endpoint
from gateway.providers.adapter import MalformedReply
from gateway.providers.anthropic import ANTHROPIC_VERSION, AnthropicAdapter
from gateway.providers.anthropic_stream import AnthropicChatStream, AnthropicEventStream
from gateway.providers.registry import adapter_for

PROVIDER = Provider(name="anthropic", kind="anthropic", base_url="http://127.0.0.1:9/v1/",
                    api_key_env="ANTHROPIC_KEY")
ADAPTER = AnthropicAdapter()
MESSAGE = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude",
           "content": [{"type": "text", "text": "Hi!"}], "stop_reason": "end_turn",
           "usage": {"input_tokens": 9, "output_tokens": 2, "cache_read_input_tokens": 4}}


def test_the_registry_gives_it_for_its_kind():
    assert isinstance(adapter_for(PROVIDER), AnthropicAdapter)


def test_a_native_request_goes_out_as_it_came_with_anthropics_headers():
    body = {"model": "claude-sonnet-4-5", "max_tokens": 5, "messages": [],
            "system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}]}
    wire = ADAPTER.messages_request(PROVIDER, body, "sk-ant", version="2023-01-01",
                                    beta="prompt-caching-2024-07-31")
    assert wire.url == "http://127.0.0.1:9/v1/messages"
    assert wire.headers["x-api-key"] == "sk-ant"
    assert "authorization" not in wire.headers
    assert wire.headers["anthropic-version"] == "2023-01-01"
    assert wire.headers["anthropic-beta"] == "prompt-caching-2024-07-31"
    assert json.loads(wire.content) == body
    default = ADAPTER.messages_request(PROVIDER, {**body, "stream": True}, None)
    assert default.headers["anthropic-version"] == ANTHROPIC_VERSION
    assert default.headers["accept"] == "text/event-stream"
    assert "x-api-key" not in default.headers


def test_a_chat_request_is_translated():
    body = {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hi"}]}
    wire = ADAPTER.chat_request(PROVIDER, body, "sk-ant")
    sent = json.loads(wire.content)
    assert sent["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert sent["max_tokens"] > 0 and wire.url.endswith("/messages")


def test_answers_natively_and_as_a_completion():
    native = ADAPTER.parse_messages(json.dumps(MESSAGE).encode())
    assert native.body == MESSAGE and native.text == "Hi!"
    assert native.usage is not None and native.usage.prompt_tokens == 13
    chat = ADAPTER.parse_chat(json.dumps(MESSAGE).encode())
    assert chat.body["choices"][0]["message"]["content"] == "Hi!"
    assert chat.usage == native.usage


@pytest.mark.parametrize("content", [b"nope", b"[]", b'{"type": "completion"}'])
def test_an_answer_that_is_no_message_is_malformed(content):
    with pytest.raises(MalformedReply):
        ADAPTER.parse_messages(content)


def test_stream_parsers_and_endpoints():
    assert isinstance(ADAPTER.stream_parser(), AnthropicChatStream)
    assert isinstance(ADAPTER.endpoint_stream_parser(Endpoint.MESSAGES), AnthropicEventStream)
    assert Endpoint.MESSAGES in ADAPTER.endpoints
    wire = ADAPTER.endpoint_request(PROVIDER, Endpoint.MESSAGES, {"model": "m"}, None)
    assert json.loads(wire.content) == {"model": "m"}


def test_anthropic_errors_keep_their_type():
    body = {"type": "error", "error": {"type": "not_found_error", "message": "model: x"}}
    assert ADAPTER.error_body(json.dumps(body).encode()) == {"error": {
        "message": "model: x", "type": "not_found_error", "param": None, "code": None}}
    assert ADAPTER.error_body(b"<html>") is None
    assert ADAPTER.error_body(b'{"error": "flat"}') is None


def test_responses_go_through_chat_to_messages_and_back():
    wire = ADAPTER.endpoint_request(PROVIDER, Endpoint.RESPONSES,
                                    {"model": "claude", "input": "Hi"}, None)
    assert wire.url.endswith("/messages")
    assert json.loads(wire.content)["messages"][0]["content"][0]["text"] == "Hi"
    reply = ADAPTER.parse_endpoint(Endpoint.RESPONSES, json.dumps(MESSAGE).encode())
    assert reply.body["object"] == "response"
    assert reply.body["usage"]["input_tokens_details"]["cached_tokens"] == 4
