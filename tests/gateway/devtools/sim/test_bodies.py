import json
import random

import pytest

from gateway.devtools.sim import bodies
from gateway.devtools.sim.behaviour import plan_reply
from gateway.devtools.sim.request import parse_chat_request
from gateway.devtools.sim.settings import Behaviour

TOOL = {"type": "function", "function": {"name": "lookup", "parameters": {
    "type": "object", "properties": {"q": {"type": "string"}}}}}


def planned(**body):
    request = parse_chat_request({"model": "m", "messages": [{"role": "user", "content": "x"}],
                                  **body})
    return plan_reply(request, Behaviour(completion_tokens=(5, 5)), random.Random(2))


def events(encoder, plan):
    raw = [encoder.opening(c) for c in plan.choices]
    for c in plan.choices:
        raw += encoder.pieces(c, 0, len(c.pieces))
    raw += [encoder.closing(c) for c in plan.choices]
    return [json.loads(e.removeprefix("data: ")) for e in raw]


@pytest.mark.parametrize("include_usage", [True, False])
def test_every_chunk_is_openai_shaped_json(include_usage):
    plan = planned(n=2)
    chunks = events(bodies.ChunkEncoder("chatcmpl-1", 7, "m", include_usage), plan)
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert all(("usage" in c) is include_usage for c in chunks)
    text = {0: "", 1: ""}
    for chunk in chunks:
        (choice,) = chunk["choices"]
        text[choice["index"]] += choice["delta"].get("content") or ""
    assert text == {0: plan.choices[0].content, 1: plan.choices[1].content}


def test_usage_chunk_has_no_choices_and_the_plans_usage():
    plan = planned()
    usage = json.loads(bodies.ChunkEncoder("c", 1, "m", True).usage(plan)[6:])
    assert usage["choices"] == []
    assert usage["usage"]["completion_tokens"] == 5
    assert usage["usage"]["total_tokens"] == usage["usage"]["prompt_tokens"] + 5


def test_streamed_tool_call_arguments_join_into_the_call():
    plan = planned(tools=[TOOL])
    chunks = events(bodies.ChunkEncoder("c", 1, "m", False), plan)
    first = chunks[0]["choices"][0]["delta"]["tool_calls"][0]
    assert first["function"] == {"name": "lookup", "arguments": ""}
    arguments = "".join(c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"]
                        for c in chunks[1:-1])
    assert json.loads(arguments) == json.loads(plan.choices[0].tool_call.arguments)
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_completion_body_with_and_without_usage():
    plan = planned()
    body = json.loads(bodies.completion_body("chatcmpl-1", 7, "m", plan))
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"]["content"] == plan.choices[0].content
    assert body["usage"]["completion_tokens"] == 5
    assert "usage" not in json.loads(bodies.completion_body("c", 7, "m", plan, False))


def test_broken_bodies_are_not_json():
    with pytest.raises(json.JSONDecodeError):
        json.loads(bodies.malformed_body("c", "m"))
    with pytest.raises(json.JSONDecodeError):
        json.loads(bodies.ChunkEncoder("c", 1, "m", False).broken().removeprefix("data: "))
