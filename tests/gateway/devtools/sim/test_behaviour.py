import json
import random

import pytest

from gateway.devtools.sim.behaviour import PromptCache, plan_reply
from gateway.devtools.sim.request import InvalidRequest, parse_chat_request
from gateway.devtools.sim.settings import Behaviour
from gateway.devtools.sim.tokens import count_text

FIXED = Behaviour(ttft_ms=100, per_token_ms=10, jitter=0, completion_tokens=(30, 30))
WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather",
    "parameters": {"type": "object", "required": ["city"], "properties": {
        "city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer"}}},
}}


def plan(behaviour: Behaviour = FIXED, cache: PromptCache | None = None, **body):
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], **body}
    return plan_reply(parse_chat_request(body), behaviour, random.Random(1), cache)


def test_usage_counts_prompt_and_every_piece_of_the_completion():
    reply = plan()
    (choice,) = reply.choices
    assert reply.usage.prompt_tokens == 8
    assert reply.usage.completion_tokens == 30 == len(choice.pieces)
    assert count_text(choice.content) == 30
    assert choice.finish_reason == "stop"


def test_max_tokens_bounds_the_completion_and_finishes_with_length():
    reply = plan(max_tokens=7)
    assert reply.usage.completion_tokens == 7
    assert reply.choices[0].finish_reason == "length"


def test_the_tighter_of_max_tokens_and_max_completion_tokens_wins():
    assert plan(max_tokens=20, max_completion_tokens=5).usage.completion_tokens == 5


def test_n_choices_each_get_a_completion_and_usage_sums_them():
    reply = plan(n=3)
    assert [c.index for c in reply.choices] == [0, 1, 2]
    assert reply.usage.completion_tokens == 90


def test_latency_without_jitter_is_ttft_plus_a_step_per_further_token():
    reply = plan()
    assert reply.ttft_s == pytest.approx(0.1)
    assert reply.duration_s == pytest.approx(0.1 + 29 * 0.01)


def test_jitter_stays_within_its_fraction():
    jittery = FIXED.model_copy(update={"jitter": 0.2})
    ttfts = [plan_reply(parse_chat_request({"model": "m", "messages": [
        {"role": "user", "content": "x"}]}), jittery, random.Random(s)).ttft_s
        for s in range(200)]
    assert 0.08 <= min(ttfts) < max(ttfts) <= 0.12


def test_zero_latency_plans_an_instant_answer():
    instant = Behaviour(ttft_ms=0, per_token_ms=0, jitter=0.5)
    assert plan(instant).duration_s == 0


def test_reasoning_tokens_are_billed_as_completion_and_delay_the_first_token():
    thinking = FIXED.model_copy(update={"reasoning_tokens": (20, 20)})
    reply = plan(thinking)
    assert reply.usage.reasoning_tokens == 20
    assert reply.usage.completion_tokens == 50
    assert reply.ttft_s == pytest.approx(0.1 + 20 * 0.01)


def test_tools_with_auto_choice_get_a_tool_call_with_arguments_matching_the_schema():
    (choice,) = plan(tools=[WEATHER_TOOL]).choices
    assert choice.finish_reason == "tool_calls"
    assert choice.content is None
    args = json.loads(choice.tool_call.arguments)
    assert isinstance(args["city"], str) and args["unit"] == "celsius"
    assert isinstance(args["days"], int)
    assert "".join(choice.pieces) == choice.tool_call.arguments


def test_no_tool_call_when_tool_choice_is_none_or_a_tool_result_just_came_back():
    assert plan(tools=[WEATHER_TOOL], tool_choice="none").choices[0].tool_call is None
    messages = [{"role": "user", "content": "weather?"},
                {"role": "assistant", "content": None, "tool_calls": []},
                {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]
    assert plan(tools=[WEATHER_TOOL], messages=messages).choices[0].tool_call is None


def test_json_mode_answers_valid_json_counted_in_tokens():
    reply = plan(response_format={"type": "json_object"})
    content = reply.choices[0].content
    assert isinstance(json.loads(content), dict)
    assert reply.usage.completion_tokens == count_text(content)


def test_json_mode_respects_max_tokens_too():
    reply = plan(response_format={"type": "json_object"}, max_tokens=4)
    assert reply.usage.completion_tokens <= 4
    assert reply.choices[0].finish_reason == "length"


def test_a_long_prompt_seen_before_reports_cached_tokens_in_steps_of_128():
    cache = PromptCache(min_tokens=1024)
    long = [{"role": "system", "content": "policy " * 1500},
            {"role": "user", "content": "first question"}]
    assert plan(cache=cache, messages=long).usage.cached_tokens == 0
    again = [long[0], {"role": "user", "content": "another question"}]
    cached = plan(cache=cache, messages=again).usage.cached_tokens
    assert cached >= 1024 and cached % 128 == 0
    assert cached <= plan(messages=long).usage.prompt_tokens


def test_short_prompts_are_never_cached():
    cache = PromptCache(min_tokens=1024)
    plan(cache=cache)
    assert plan(cache=cache).usage.cached_tokens == 0


@pytest.mark.parametrize(("body", "param"), [
    ({"messages": [{"role": "user", "content": "x"}]}, "model"),
    ({"model": "m", "messages": []}, "messages"),
    ({"model": "m", "messages": ["hello"]}, "messages[0]"),
    ({"model": "m", "messages": [{"role": "user"}], "max_tokens": 0}, "max_tokens"),
    ({"model": "m", "messages": [{"role": "user"}], "n": 99}, "n"),
    ({"model": "m", "messages": [{"role": "user"}], "stream_options": {}}, "stream_options"),
])
def test_invalid_requests_name_the_parameter(body, param):
    with pytest.raises(InvalidRequest) as err:
        parse_chat_request(body)
    assert err.value.param == param
