"""The OpenAI-compatible adapter: the request it builds, the answers it accepts, usage
with its details, and a stream read event by event."""

from __future__ import annotations

import json

import pytest

from gateway.domain.config import Provider
from gateway.domain.endpoints import Endpoint
from gateway.providers.adapter import EndpointAdapter, MalformedReply
from gateway.providers.openai import (
    OpenAIAdapter,
    ResponsesStreamParser,
    completion_text,
    usage_from_openai,
)
from gateway.providers.registry import adapter_for, endpoints_of

PROVIDER = Provider(name="relay", base_url="http://127.0.0.1:9/v1/", api_key_env="RELAY_KEY")


def chunk(content: str | None = None, finish: str | None = None, usage=None) -> bytes:
    choices = [] if usage is not None and content is None else [
        {"index": 0, "delta": {"content": content} if content else {}, "finish_reason": finish}]
    body = {"id": "c1", "object": "chat.completion.chunk", "model": "deepseek-chat",
            "choices": choices}
    if usage is not None:
        body["usage"] = usage
    return json.dumps(body).encode()


def test_the_registry_gives_the_openai_adapter_for_its_kind():
    assert isinstance(adapter_for(PROVIDER), OpenAIAdapter)


def test_the_request_is_a_compact_post_to_chat_completions_with_a_bearer_key():
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "x_extra": 1}
    wire = OpenAIAdapter().chat_request(PROVIDER, body, "sk-secret")
    assert wire.url == "http://127.0.0.1:9/v1/chat/completions"
    assert wire.headers["authorization"] == "Bearer sk-secret"
    assert json.loads(wire.content) == body  # unknown fields pass through
    assert b" " not in wire.content.replace(b'"content":"hi"', b"")


def test_no_key_means_no_authorization_header():
    wire = OpenAIAdapter().chat_request(PROVIDER, {"model": "m"}, None)
    assert "authorization" not in wire.headers


def test_a_completion_is_parsed_with_its_usage_and_text():
    body = {"choices": [{"message": {"content": "Hello"}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1}}
    reply = OpenAIAdapter().parse_chat(json.dumps(body).encode())
    assert reply.body == body and reply.text == "Hello"
    assert reply.usage is not None and reply.usage.prompt_tokens == 3


@pytest.mark.parametrize("content", [b"<html>", b"[]", b'{"id": "x"}'])
def test_an_answer_that_is_no_completion_is_malformed(content):
    with pytest.raises(MalformedReply):
        OpenAIAdapter().parse_chat(content)


def test_an_upstream_error_body_passes_on_only_in_openai_shape():
    adapter = OpenAIAdapter()
    err = {"error": {"message": "bad", "type": "invalid_request_error", "code": "x"}}
    assert adapter.error_body(json.dumps(err | {"extra": 1}).encode()) == err
    assert adapter.error_body(b"upstream exploded") is None
    assert adapter.error_body(b'{"error": "text"}') is None


def test_reported_usage_with_cached_and_reasoning_details():
    u = usage_from_openai({"prompt_tokens": 100, "completion_tokens": 40,
                           "prompt_tokens_details": {"cached_tokens": 60},
                           "completion_tokens_details": {"reasoning_tokens": 10}})
    assert (u.prompt_tokens, u.cached_prompt_tokens, u.completion_tokens,
            u.reasoning_tokens) == (100, 60, 40, 10)


def test_inconsistent_details_are_clamped_not_trusted():
    u = usage_from_openai({"prompt_tokens": 10, "completion_tokens": 1,
                           "prompt_tokens_details": {"cached_tokens": 99},
                           "completion_tokens_details": {"reasoning_tokens": 5}})
    assert u.cached_prompt_tokens == 10 and u.reasoning_tokens == 1


def test_usage_without_a_prompt_count_is_no_usage():
    assert usage_from_openai({"prompt_tokens": "x"}) is None
    assert usage_from_openai(None) is None


def test_completion_text_covers_every_choice_and_tool_arguments():
    body = {"choices": [
        {"message": {"content": "a"}},
        {"message": {"content": None, "tool_calls": [
            {"function": {"name": "f", "arguments": "{\"x\": 1}"}}]}},
    ]}
    assert completion_text(body) == "a{\"x\": 1}"


def test_a_stream_is_read_event_by_event():
    parser = OpenAIAdapter().stream_parser()
    assert parser.feed(chunk("Hi"))[0]["choices"][0]["delta"]["content"] == "Hi"
    assert not parser.finished
    parser.feed(chunk(None, finish="stop"))
    assert parser.text() == "Hi" and parser.finished and not parser.done
    usage = {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
    assert parser.feed(chunk(usage=usage))[0]["usage"] == usage
    assert parser.usage is not None and parser.usage.completion_tokens == 2
    assert parser.feed(b"[DONE]") == [] and parser.done


def test_a_chunk_that_is_not_a_json_object_is_malformed():
    parser = OpenAIAdapter().stream_parser()
    with pytest.raises(MalformedReply):
        parser.feed(b"{broken")
    with pytest.raises(MalformedReply):
        parser.feed(b"[1]")


# -- the other OpenAI APIs ------------------------------------------------------------------
RESPONSE_USAGE = {"input_tokens": 120, "input_tokens_details": {"cached_tokens": 64},
                  "output_tokens": 30, "output_tokens_details": {"reasoning_tokens": 12},
                  "total_tokens": 150}


def test_the_adapter_declares_and_routes_each_openai_api_to_its_path():
    adapter = OpenAIAdapter()
    assert isinstance(adapter, EndpointAdapter)
    assert endpoints_of(adapter) == {Endpoint.CHAT_COMPLETIONS, Endpoint.COMPLETIONS,
                                     Endpoint.EMBEDDINGS, Endpoint.RESPONSES,
                                     Endpoint.MESSAGES}  # Messages: translated to chat
    for endpoint, path in [(Endpoint.EMBEDDINGS, "/embeddings"),
                           (Endpoint.COMPLETIONS, "/completions"),
                           (Endpoint.RESPONSES, "/responses")]:
        wire = adapter.endpoint_request(PROVIDER, endpoint, {"model": "m", "x": 1}, "sk-k")
        assert wire.url == "http://127.0.0.1:9/v1" + path
        assert wire.headers["authorization"] == "Bearer sk-k"
        assert json.loads(wire.content) == {"model": "m", "x": 1}


def test_embeddings_usage_is_input_tokens_only():
    body = {"object": "list", "data": [{"embedding": [0.1]}],
            "usage": {"prompt_tokens": 7, "total_tokens": 7}}
    reply = OpenAIAdapter().parse_endpoint(Endpoint.EMBEDDINGS, json.dumps(body).encode())
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (7, 0)
    with pytest.raises(MalformedReply):
        OpenAIAdapter().parse_endpoint(Endpoint.EMBEDDINGS, b'{"object": "list"}')


def test_a_response_body_gives_its_usage_by_class_and_its_text():
    body = {"object": "response", "status": "completed", "usage": RESPONSE_USAGE, "output": [
        {"type": "reasoning", "summary": []},
        {"type": "message", "content": [{"type": "output_text", "text": "Hello"}]},
        {"type": "function_call", "name": "f", "arguments": '{"a":1}'}]}
    reply = OpenAIAdapter().parse_endpoint(Endpoint.RESPONSES, json.dumps(body).encode())
    u = reply.usage
    assert (u.prompt_tokens, u.cached_prompt_tokens, u.completion_tokens, u.reasoning_tokens) \
        == (120, 64, 30, 12)
    assert reply.text == 'Hello{"a":1}'
    with pytest.raises(MalformedReply):
        OpenAIAdapter().parse_endpoint(Endpoint.RESPONSES, b'{"object": "response"}')


def test_a_legacy_completion_gives_its_text_and_usage():
    body = {"object": "text_completion", "choices": [{"text": "abc"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2}}
    reply = OpenAIAdapter().parse_endpoint(Endpoint.COMPLETIONS, json.dumps(body).encode())
    assert reply.text == "abc" and reply.usage.completion_tokens == 2


def _event(kind: str, **fields) -> bytes:
    return json.dumps({"type": kind, **fields}).encode()


@pytest.mark.parametrize("terminal", ["response.completed", "response.incomplete",
                                      "response.failed"])
def test_a_responses_stream_takes_its_usage_from_the_terminal_event(terminal):
    parser = OpenAIAdapter().endpoint_stream_parser(Endpoint.RESPONSES)
    assert isinstance(parser, ResponsesStreamParser)
    parser.feed(_event("response.created", response={"status": "in_progress", "usage": None}))
    parser.feed(_event("response.output_text.delta", delta="Hel"))
    parser.feed(_event("response.output_text.delta", delta="lo"))
    assert parser.usage is None and not parser.done
    status = terminal.split(".")[1]
    relayed = parser.feed(_event(terminal, response={"status": status, "usage": RESPONSE_USAGE}))
    assert relayed[0]["type"] == terminal  # events pass through as they are
    assert parser.done and parser.finished and parser.status == status
    assert parser.usage.prompt_tokens == 120 and parser.text() == "Hello"


def test_a_responses_event_without_a_type_is_malformed():
    with pytest.raises(MalformedReply):
        ResponsesStreamParser().feed(b'{"delta": "x"}')
    with pytest.raises(MalformedReply):
        ResponsesStreamParser().feed(b"not json")


def test_legacy_completion_chunks_count_their_text():
    parser = OpenAIAdapter().endpoint_stream_parser(Endpoint.COMPLETIONS)
    parser.feed(json.dumps({"choices": [{"text": "ab", "finish_reason": None}]}).encode())
    parser.feed(json.dumps({"choices": [{"text": "c", "finish_reason": "stop"}]}).encode())
    assert parser.text() == "abc" and parser.finished
