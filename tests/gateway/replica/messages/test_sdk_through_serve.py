"""Acceptance: the official anthropic SDK, unchanged, against the deployed gateway (Ray
Serve, `costgate up`) on the sim, the ledger in PostgreSQL. Messages plain and streamed,
with a tool call and with prompt caching: each parses in the SDK, carries
`x-costgate-request-id`, and leaves one row whose token counts are the usage the SDK
reports, priced class by class. And the other way round: a chat completion routed to the
native Anthropic upstream, streamed back through the openai SDK with a tool call."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx
import openai
import pytest

from tests.gateway.replica.endpoints.test_openai_sdk_through_serve import (
    assert_priced_by_class,
    ledger_row,
)

pytestmark = pytest.mark.ray
TOOLS = [{"name": "get_weather", "description": "Current weather for a city.",
          "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                           "required": ["city"]}}]
LONG_SYSTEM = "You are a meticulous financial analyst who cites every figure. " * 120


def claude(gateway: Any) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=gateway.base_url, api_key=gateway.api_key,
                               max_retries=0, timeout=60)


def assert_row_is_the_sdks_usage(row: dict[str, Any], usage: Any, stream: bool) -> None:
    read = usage.cache_read_input_tokens or 0
    written = usage.cache_creation_input_tokens or 0
    assert row["endpoint"] == "messages" and row["status"] == "ok"
    assert row["stream"] is stream and row["usage_source"] == "provider"
    assert row["prompt_tokens"] == usage.input_tokens + read + written
    assert row["cached_prompt_tokens"] == read
    assert row["cache_write_tokens"] == written
    assert row["completion_tokens"] == usage.output_tokens


def test_a_message_through_serve(gateway, sim):
    raw = claude(gateway).messages.with_raw_response.create(
        model="claude-sonnet-4.5", max_tokens=64, system="Three bullets.",
        messages=[{"role": "user", "content": "Summarise the quarter."}])
    message = raw.parse()
    assert message.type == "message" and message.model == "claude-sonnet-4.5"
    assert message.content[0].type == "text" and message.content[0].text
    row = ledger_row(gateway, raw.headers["x-costgate-request-id"])
    assert row["model"] == "claude-sonnet-4.5" and row["provider"] == "anthropic"
    assert_row_is_the_sdks_usage(row, message.usage, stream=False)
    classes = assert_priced_by_class(gateway, row)
    assert classes["input"] > 0 and classes["output"] > 0
    # natively: the sim saw Anthropic's route, not chat completions
    recent = sim.recent_requests()[-1]
    assert recent["model"] == "claude-sonnet-4-5" and "anthropic-version" in recent["header_names"]


def test_a_streamed_message_with_a_tool_call_through_serve(gateway, sim):
    with claude(gateway).messages.with_streaming_response.create(
        model="claude-sonnet-4.5", max_tokens=200, tools=TOOLS, stream=True,
        messages=[{"role": "user", "content": "What is the weather in Paris?"}],
    ) as raw:
        request_id = raw.headers["x-costgate-request-id"]
        events = list(raw.parse())
    kinds = [e.type for e in events]
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    start = events[0].message
    assert start.model == "claude-sonnet-4.5"
    tool_starts = [e for e in events if e.type == "content_block_start"
                   and e.content_block.type == "tool_use"]
    assert tool_starts and tool_starts[0].content_block.name == "get_weather"
    deltas = [e for e in events if e.type == "message_delta"]
    assert deltas[-1].delta.stop_reason == "tool_use"
    # the SDK's view: the input side from message_start, the output count from the last
    # (cumulative) message_delta
    usage = start.usage.model_copy(update={"output_tokens": deltas[-1].usage.output_tokens})
    row = ledger_row(gateway, request_id)
    assert_row_is_the_sdks_usage(row, usage, stream=True)
    assert row["ttft_ms"] is not None
    assert_priced_by_class(gateway, row)


def test_the_sdks_stream_helper_gets_a_tool_use_block_through_serve(gateway, sim):
    with claude(gateway).messages.stream(
        model="claude-sonnet-4.5", max_tokens=200, tools=TOOLS,
        tool_choice={"type": "tool", "name": "get_weather"},
        messages=[{"role": "user", "content": "Weather in Rome?"}],
    ) as stream:
        final = stream.get_final_message()
        request_id = stream.response.headers["x-costgate-request-id"]
    [call] = [b for b in final.content if b.type == "tool_use"]
    assert call.name == "get_weather" and "city" in call.input
    row = ledger_row(gateway, request_id)
    assert_row_is_the_sdks_usage(row, final.usage, stream=True)


def test_prompt_caching_writes_then_reads_and_each_class_is_priced(gateway, sim):
    system = [{"type": "text", "text": LONG_SYSTEM, "cache_control": {"type": "ephemeral"}}]
    rows = []
    for question in ("First question?", "Second question?"):
        raw = claude(gateway).messages.with_raw_response.create(
            model="claude-sonnet-4.5", max_tokens=16, system=system,
            messages=[{"role": "user", "content": question}])
        message = raw.parse()
        row = ledger_row(gateway, raw.headers["x-costgate-request-id"])
        assert_row_is_the_sdks_usage(row, message.usage, stream=False)
        rows.append((row, assert_priced_by_class(gateway, row)))
    (first, first_cost), (second, second_cost) = rows
    assert first["cache_write_tokens"] > 1024 and first["cached_prompt_tokens"] == 0
    assert second["cached_prompt_tokens"] == first["cache_write_tokens"]
    assert first_cost["cache_write"] > 0 and second_cost["cached_input"] > 0


def test_x_api_key_auth_and_anthropics_error_shape_through_serve(gateway, sim):
    body = {"model": "claude-haiku-4.5", "max_tokens": 8,
            "messages": [{"role": "user", "content": "hi"}]}
    ok = httpx.post(gateway.base_url + "/v1/messages", json=body, timeout=60,
                    headers={"x-api-key": gateway.api_key, "anthropic-version": "2023-06-01"})
    assert ok.status_code == 200 and ok.json()["type"] == "message"
    with pytest.raises(anthropic.BadRequestError) as caught:
        claude(gateway).messages.create(model="claude-haiku-4.5", max_tokens=0,
                                        messages=[{"role": "user", "content": "hi"}])
    assert caught.value.body["type"] == "error"
    assert caught.value.body["error"]["type"] == "invalid_request_error"


def test_a_chat_completion_on_native_anthropic_streams_a_tool_call_to_the_openai_sdk(
        gateway, sim):
    client = openai.OpenAI(base_url=gateway.base_url + "/v1", api_key=gateway.api_key,
                           max_retries=0, timeout=60)
    tools = [{"type": "function", "function": {
        "name": "get_weather", "description": "Current weather for a city.",
        "parameters": TOOLS[0]["input_schema"]}}]
    with client.chat.completions.with_streaming_response.create(
        model="claude-sonnet-4.5", stream=True, stream_options={"include_usage": True},
        tools=tools, messages=[{"role": "user", "content": "Weather in Oslo?"}],
    ) as raw:
        request_id = raw.headers["x-costgate-request-id"]
        chunks = list(raw.parse())
    arguments: dict[int, str] = {}
    names: dict[int, str] = {}
    finish = None
    for chunk in chunks:
        for choice in chunk.choices:
            finish = choice.finish_reason or finish
            for call in choice.delta.tool_calls or ():
                names[call.index] = names.get(call.index, "") + (call.function.name or "")
                arguments[call.index] = arguments.get(call.index, "") + (
                    call.function.arguments or "")
    assert finish == "tool_calls" and names == {0: "get_weather"}
    assert "city" in json.loads(arguments[0])
    usage = chunks[-1].usage
    assert usage is not None and chunks[-1].model == "claude-sonnet-4.5"
    row = ledger_row(gateway, request_id)
    assert row["endpoint"] == "chat.completions" and row["provider"] == "anthropic"
    assert (row["prompt_tokens"], row["completion_tokens"]) == (
        usage.prompt_tokens, usage.completion_tokens)
    assert row["cached_prompt_tokens"] == usage.prompt_tokens_details.cached_tokens
    assert_priced_by_class(gateway, row)
    assert sim.recent_requests()[-1]["model"] == "claude-sonnet-4-5"


def test_a_response_routed_to_native_gemini_through_serve(gateway, sim):
    client = openai.OpenAI(base_url=gateway.base_url + "/v1", api_key=gateway.api_key,
                           max_retries=0, timeout=60)
    raw = client.responses.with_raw_response.create(
        model="gemini-2.5-flash", input="Summarise the quarter.", instructions="Be brief.",
        max_output_tokens=40)
    reply = raw.parse()
    assert reply.status in ("completed", "incomplete") and reply.output_text
    assert reply.model == "gemini-2.5-flash"
    row = ledger_row(gateway, raw.headers["x-costgate-request-id"])
    assert row["endpoint"] == "responses" and row["provider"] == "google"
    assert row["prompt_tokens"] == reply.usage.input_tokens
    assert row["cached_prompt_tokens"] == reply.usage.input_tokens_details.cached_tokens
    assert row["completion_tokens"] == reply.usage.output_tokens
    assert row["reasoning_tokens"] == reply.usage.output_tokens_details.reasoning_tokens
    assert_priced_by_class(gateway, row)
    # natively: the sim saw Gemini's generateContent, with no OpenAI field in it
    assert sim.recent_requests()[-1]["model"] == "gemini-2.5-flash"


def test_a_streamed_response_with_a_tool_call_routed_to_native_gemini(gateway, sim):
    client = openai.OpenAI(base_url=gateway.base_url + "/v1", api_key=gateway.api_key,
                           max_retries=0, timeout=60)
    with client.responses.with_streaming_response.create(
        model="gemini-2.5-flash", input="Weather in Oslo?", stream=True,
        tools=[{"type": "function", "name": "get_weather",
                "parameters": TOOLS[0]["input_schema"]}], tool_choice="required",
    ) as raw:
        request_id = raw.headers["x-costgate-request-id"]
        events = list(raw.parse())
    kinds = [e.type for e in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    final = events[-1].response
    [call] = [item for item in final.output if item.type == "function_call"]
    assert call.name == "get_weather" and "city" in json.loads(call.arguments)
    row = ledger_row(gateway, request_id)
    assert row["endpoint"] == "responses" and row["stream"] and row["provider"] == "google"
    assert (row["prompt_tokens"], row["completion_tokens"]) == (
        final.usage.input_tokens, final.usage.output_tokens)
    assert_priced_by_class(gateway, row)


def test_the_sdks_count_tokens_through_serve(gateway, sim):
    counted = claude(gateway).messages.count_tokens(
        model="claude-sonnet-4.5", system=LONG_SYSTEM, tools=TOOLS,
        messages=[{"role": "user", "content": "What is the weather in Paris?"}])
    assert counted.input_tokens > 1000  # the long system prompt is in it
