"""Validation of a Messages body: the fields the gateway acts on, with their paths."""

from __future__ import annotations

import pytest

from gateway.domain.openai_errors import OpenAIError
from gateway.replica.messages.request import validate_messages_request

OK = {"model": "claude-sonnet-4.5", "max_tokens": 10,
      "messages": [{"role": "user", "content": "hi"}]}


def test_a_valid_body_keeps_every_field():
    body = {**OK, "stream": True, "thinking": {"type": "enabled", "budget_tokens": 1024},
            "system": [{"type": "text", "text": "s"}]}
    req = validate_messages_request(body)
    assert req.body is body and req.model == "claude-sonnet-4.5"
    assert req.stream and req.include_usage and req.max_tokens == 10


@pytest.mark.parametrize(("change", "param"), [
    ({"model": 3}, "model"),
    ({"model": "bad\x00name"}, "model"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"max_tokens": True}, "max_tokens"),
    ({"messages": "hi"}, "messages"),
    ({"messages": [{"role": "tool", "content": "x"}]}, "messages.0.role"),
    ({"messages": [{"role": "user", "content": [{"text": "no type"}]}]}, "messages.0.content"),
    ({"system": 5}, "system"),
    ({"stream": "yes"}, "stream"),
    ({"tools": {}}, "tools"),
    ({"metadata": []}, "metadata"),
    ({"temperature": "hot"}, "temperature"),
])
def test_bad_fields_are_400s_naming_them(change, param):
    with pytest.raises(OpenAIError) as caught:
        validate_messages_request({**OK, **change})
    assert caught.value.status == 400 and caught.value.param == param


def test_a_body_that_is_no_object_is_a_400():
    with pytest.raises(OpenAIError):
        validate_messages_request([OK])
