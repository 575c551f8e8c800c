"""The simulator's service tiers and hosted web search, as the providers report them:
OpenAI's `service_tier` in the body and chunks and `web_search_call` output items,
Anthropic's `usage.service_tier` and `usage.server_tool_use.web_search_requests`."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

MSG = [{"role": "user", "content": "Hello"}]


@pytest.fixture
def client(sim):
    return openai.OpenAI(base_url=sim.base_url + "/v1", api_key="sk-sim", max_retries=0,
                         timeout=10)


@pytest.mark.parametrize(("asked", "served"), [(None, "default"), ("auto", "default"),
                                               ("flex", "flex"), ("priority", "priority")])
def test_a_chat_answer_names_the_tier_it_was_served_at(client, asked, served):
    extra = {} if asked is None else {"service_tier": asked}
    done = client.chat.completions.create(model="gpt-4o-mini", messages=MSG, max_tokens=5,
                                          **extra)  # type: ignore[arg-type]
    assert done.service_tier == served
    chunks = list(client.chat.completions.create(
        model="gpt-4o-mini", messages=MSG, max_tokens=5, stream=True,
        stream_options={"include_usage": True}, **extra))  # type: ignore[arg-type]
    assert chunks[-1].usage is not None and chunks[-1].service_tier == served


def test_a_response_with_web_search_reports_one_item_per_call(client):
    r = client.responses.create(model="gpt-4o-mini", input="news?", max_output_tokens=8,
                                tools=[{"type": "web_search_preview"}], max_tool_calls=3,
                                service_tier="flex")
    assert [o.type for o in r.output].count("web_search_call") == 3
    assert r.service_tier == "flex"
    events = list(client.responses.create(model="gpt-4o-mini", input="news?", stream=True,
                                          max_output_tokens=8,
                                          tools=[{"type": "web_search_preview"}]))
    final = events[-1].response  # completed or incomplete (the output cap): the same
    assert [o.type for o in final.output].count("web_search_call") == 1  # once by default
    plain = client.responses.create(model="gpt-4o-mini", input="x", max_output_tokens=4)
    assert "web_search_call" not in [o.type for o in plain.output]


def test_anthropic_reports_web_searches_and_its_tier_in_usage(sim):
    body = {"model": "claude-sonnet-4-5", "max_tokens": 8, "messages": MSG,
            "service_tier": "priority",
            "tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 2}]}
    plain = httpx.post(sim.base_url + "/v1/messages", json=body, timeout=10).json()
    assert plain["usage"]["server_tool_use"] == {"web_search_requests": 2}
    assert plain["usage"]["service_tier"] == "priority"
    with httpx.stream("POST", sim.base_url + "/v1/messages", json={**body, "stream": True},
                      timeout=10) as streamed:
        events = [json.loads(line[6:]) for line in streamed.iter_lines()
                  if line.startswith("data: ")]
    delta = next(e for e in events if e["type"] == "message_delta")
    assert delta["usage"]["server_tool_use"] == {"web_search_requests": 2}
    standard = httpx.post(sim.base_url + "/v1/messages", json={**body, "tools": []},
                          timeout=10).json()
    assert "server_tool_use" not in standard["usage"]
