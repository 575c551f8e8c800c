"""The OpenAI-compatible adapter: the request it builds, the answers it accepts, usage
with its details, and a stream read event by event."""

from __future__ import annotations

import json

import pytest

from gateway.domain.config import Provider
from gateway.providers.adapter import MalformedReply
from gateway.providers.openai import OpenAIAdapter, completion_text, usage_from_openai
from gateway.providers.registry import adapter_for

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
