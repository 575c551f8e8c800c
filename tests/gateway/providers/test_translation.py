"""Every translation of a client's body fails as the client's 400, whatever odd shapes
the fields have that validation does not look at: never a 500."""

from __future__ import annotations

import random
from typing import Any

import pytest

from gateway.domain.openai_errors import OpenAIError
from gateway.providers.anthropic_requests import chat_to_messages, messages_to_chat
from gateway.providers.gemini_translate import chat_to_gemini
from gateway.providers.responses_chat.requests import responses_to_chat
from gateway.providers.translation import count, parse_arguments

ODD: list[Any] = [None, 0, -1, True, "x", "", [], {}, [1], ["x"], [None], [{}], {"a": 1},
                  [{"type": 3}], [{"type": "text"}], [{"type": "function", "function": 5}],
                  {"type": "function", "function": None}, 1.5]


def bodies(base: dict[str, Any], fields: list[str], seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for _ in range(300):
        body = dict(base)
        for name in rng.sample(fields, rng.randint(1, 3)):
            body[name] = rng.choice(ODD)
        if rng.random() < 0.5:
            body["messages"] = [{"role": rng.choice(["user", "assistant", "tool", "system"]),
                                 "content": rng.choice(ODD),
                                 "tool_calls": rng.choice(ODD),
                                 "tool_call_id": rng.choice(ODD)}]
        out.append(body)
    return out


CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
CHAT_FIELDS = ["tools", "tool_choice", "stop", "max_tokens", "user", "response_format",
               "parallel_tool_calls", "temperature"]


@pytest.mark.parametrize("translate", [lambda b: chat_to_messages(b, "m"), chat_to_gemini])
def test_chat_translations_never_crash(translate):
    for body in bodies(CHAT, CHAT_FIELDS, 1):
        try:
            translate(body)
        except OpenAIError as err:
            assert err.status == 400


def test_messages_and_responses_translations_never_crash():
    base = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    for body in bodies(base, ["system", "tools", "tool_choice", "metadata",
                              "stop_sequences"], 2):
        try:
            messages_to_chat(body)
        except OpenAIError as err:
            assert err.status == 400
    for body in bodies({"model": "m", "input": "hi"}, ["input", "tools", "tool_choice", "text",
                                                       "instructions"], 3):
        body.pop("messages", None)
        try:
            responses_to_chat(body)
        except OpenAIError as err:
            assert err.status == 400


def test_counts_and_arguments_read_defensively():
    assert [count(v) for v in (3, -1, True, "3", None)] == [3, 0, 0, 0, 0]
    assert parse_arguments('{"a": 1}') == {"a": 1}
    assert parse_arguments("[1]") == {"arguments": [1]}
    assert parse_arguments("") == {} and parse_arguments({"b": 2}) == {"b": 2}
