"""The tier a provider says it served and the web search calls it reports, read from
each wire format: OpenAI's `service_tier` beside the usage, Responses' `web_search_call`
output items, Anthropic's `usage.service_tier` and `server_tool_use`."""

from __future__ import annotations

import json

from gateway.providers.anthropic_replies import usage_from_anthropic
from gateway.providers.openai import ResponsesStreamParser, usage_from_openai, usage_from_responses

USAGE = {"prompt_tokens": 10, "completion_tokens": 5}


def test_openai_tiers_standard_ones_are_none():
    assert usage_from_openai(USAGE, "flex").service_tier == "flex"  # type: ignore[union-attr]
    assert usage_from_openai(USAGE, "default").service_tier is None  # type: ignore[union-attr]
    assert usage_from_openai(USAGE).service_tier is None  # type: ignore[union-attr]


RESPONSE = {
    "service_tier": "priority",
    "output": [{"type": "web_search_call", "id": "ws_1"}, {"type": "web_search_call"},
               {"type": "message", "content": []}],
    "usage": {"input_tokens": 10, "output_tokens": 5},
}  # fmt: skip


def test_responses_count_web_search_items_and_read_the_tier():
    u = usage_from_responses(RESPONSE)
    assert u is not None and (u.web_search_calls, u.service_tier) == (2, "priority")
    assert (u.prompt_tokens, u.completion_tokens) == (10, 5)


def test_a_streamed_response_takes_them_from_its_terminal_event():
    parser = ResponsesStreamParser()
    event = {"type": "response.completed", "sequence_number": 3, "response": RESPONSE}
    parser.feed(json.dumps(event).encode())
    u = parser.usage
    assert u is not None and (u.web_search_calls, u.service_tier) == (2, "priority")


def test_anthropic_server_tool_use_and_tier():
    u = usage_from_anthropic({"input_tokens": 7, "output_tokens": 3, "service_tier": "standard",
                              "server_tool_use": {"web_search_requests": 4}})  # fmt: skip
    assert u is not None and (u.web_search_calls, u.service_tier) == (4, None)
    p = usage_from_anthropic({"input_tokens": 7, "output_tokens": 3, "service_tier": "priority"})
    assert p is not None and (p.web_search_calls, p.service_tier) == (0, "priority")
