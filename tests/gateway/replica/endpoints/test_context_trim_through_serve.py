"""Acceptance: context trimming on the deployed gateway (Ray Serve, `costgate up`, two
replicas) with the sim upstream and the ledger in PostgreSQL, through the official openai
SDK. A sim model is given a 2,000-token window: a longer conversation is trimmed by
`drop_oldest` (the alias's policy, or the request's header) and answered, its row carries
the tokens dropped, and under `error` it is a 400 `context_length_exceeded`."""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest

from gateway.domain.context_trim import TrimPolicy, fit
from gateway.domain.endpoints import Endpoint
from gateway.domain.token_estimate import estimate_prompt_tokens
from gateway.providers.anthropic_requests import estimate_messages
from gateway.replica.endpoints.context_fit import conversation
from tests.fixtures.gateway import (
    SMALL,
    SMALL_ALIAS,
    SMALL_CLAUDE,
    SMALL_CLAUDE_ALIAS,
    SMALL_WINDOW,
    RunningGateway,
)
from tests.gateway.replica.endpoints.test_openai_sdk_through_serve import ledger_row, sdk

pytestmark = pytest.mark.ray
WINDOW, ALIAS, CLAUDE_ALIAS = SMALL_WINDOW, SMALL_ALIAS, SMALL_CLAUDE_ALIAS


@pytest.fixture
def trim_gateway(gateway: RunningGateway) -> RunningGateway:
    """The session's gateway: its config carries the small-window models and aliases."""
    return gateway


def long_conversation(turns: int = 25) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You answer briefly."}]
    for i in range(turns):
        messages.append({"role": "user", "content": f"Question {i}: " + "what did it cost? " * 12})
        messages.append({"role": "assistant", "content": f"Answer {i}: " + "about a cent. " * 12})
    messages.append({"role": "user", "content": "So what is the total?"})
    assert estimate_prompt_tokens(messages, "gpt-4o-mini") > WINDOW  # over the window
    return messages


def test_drop_oldest_by_alias_trims_and_answers(trim_gateway, sim):
    messages = long_conversation()
    raw = sdk(trim_gateway).chat.completions.with_raw_response.create(
        model=ALIAS, messages=messages, max_tokens=64)
    reply = raw.parse()
    assert reply.choices[0].message.content and reply.model == ALIAS
    expected = fit(messages, window=WINDOW, max_tokens=64, policy=TrimPolicy.DROP_OLDEST,
                   model="gpt-4o-mini")
    assert expected.dropped_tokens > 0
    # the upstream counted the trimmed conversation: it is what was sent
    assert reply.usage.prompt_tokens == expected.prompt_tokens
    assert reply.usage.prompt_tokens + 64 <= WINDOW
    row = ledger_row(trim_gateway, raw.headers["x-costgate-request-id"])
    assert row["status"] == "ok" and row["model"] == SMALL and row["alias"] == ALIAS
    assert row["trimmed_tokens"] == expected.dropped_tokens
    assert row["prompt_tokens"] + row["trimmed_tokens"] == estimate_prompt_tokens(
        messages, "gpt-4o-mini")


def test_drop_oldest_by_header_trims_a_stream(trim_gateway, sim):
    messages = long_conversation()
    with sdk(trim_gateway).chat.completions.with_streaming_response.create(
        model=SMALL, messages=messages, max_tokens=32, stream=True,
        stream_options={"include_usage": True}, extra_headers={"x-costgate-trim": "drop_oldest"},
    ) as raw:
        request_id = raw.headers["x-costgate-request-id"]
        chunks = list(raw.parse())
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    expected = fit(messages, window=WINDOW, max_tokens=32, policy=TrimPolicy.DROP_OLDEST,
                   model="gpt-4o-mini")
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.prompt_tokens == expected.prompt_tokens
    row = ledger_row(trim_gateway, request_id)
    assert row["stream"] and row["status"] == "ok"
    assert row["trimmed_tokens"] == expected.dropped_tokens > 0


def test_middle_out_by_header_is_answered(trim_gateway, sim):
    messages = long_conversation()
    raw = sdk(trim_gateway).chat.completions.with_raw_response.create(
        model=SMALL, messages=messages, max_tokens=64,
        extra_headers={"x-costgate-trim": "middle_out"})
    expected = fit(messages, window=WINDOW, max_tokens=64, policy=TrimPolicy.MIDDLE_OUT,
                   model="gpt-4o-mini")
    assert raw.parse().usage.prompt_tokens == expected.prompt_tokens
    row = ledger_row(trim_gateway, raw.headers["x-costgate-request-id"])
    assert row["trimmed_tokens"] == expected.dropped_tokens > 0


def test_error_by_default_is_a_400_context_length_exceeded(trim_gateway, sim):
    client = sdk(trim_gateway)
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(model=SMALL, messages=long_conversation(), max_tokens=64)
    assert err.value.status_code == 400 and err.value.code == "context_length_exceeded"
    assert err.value.param == "messages" and err.value.type == "invalid_request_error"
    assert f"maximum context length is {WINDOW} tokens" in err.value.message
    request_id = err.value.response.headers["x-costgate-request-id"]
    row = ledger_row(trim_gateway, request_id)  # refused, and still its one row
    assert row["http_status"] == 400 and row["error_class"] == "context_length_exceeded"
    assert row["status"] == "client_error" and row["attempts"] == 0
    assert row["trimmed_tokens"] is None


def test_a_bad_trim_header_is_a_400(trim_gateway, sim):
    with pytest.raises(openai.BadRequestError) as err:
        sdk(trim_gateway).chat.completions.create(
            model=SMALL, messages=[{"role": "user", "content": "hi"}],
            extra_headers={"x-costgate-trim": "shorten"})
    assert err.value.code == "invalid_header" and err.value.param == "x-costgate-trim"


def test_a_conversation_that_fits_is_not_trimmed(trim_gateway, sim):
    raw = sdk(trim_gateway).chat.completions.with_raw_response.create(
        model=ALIAS, messages=[{"role": "user", "content": "Hello"}], max_tokens=16)
    row = ledger_row(trim_gateway, raw.headers["x-costgate-request-id"])
    assert row["status"] == "ok" and row["trimmed_tokens"] is None


def test_a_responses_input_is_trimmed_by_the_alias(trim_gateway, sim):
    items = [m for m in long_conversation() if m["role"] != "system"]
    body = {"input": items, "instructions": "You answer briefly.", "max_output_tokens": 64}
    raw = sdk(trim_gateway).responses.with_raw_response.create(model=ALIAS, **body)
    reply = raw.parse()
    assert reply.status == "completed" and reply.output_text
    conv = conversation(Endpoint.RESPONSES, body)
    assert conv is not None
    expected = fit(conv.messages, window=WINDOW, max_tokens=64, policy=TrimPolicy.DROP_OLDEST,
                   model="gpt-4o-mini")
    row = ledger_row(trim_gateway, raw.headers["x-costgate-request-id"])
    assert row["endpoint"] == "responses" and row["status"] == "ok"
    assert row["trimmed_tokens"] == expected.dropped_tokens > 0
    # what the upstream counted is what was left, well under what the client sent
    assert row["prompt_tokens"] < estimate_prompt_tokens(conv.messages, "gpt-4o-mini") - (
        expected.dropped_tokens // 2)


def claude(gateway: Any) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=gateway.base_url, api_key=gateway.api_key,
                               max_retries=0, timeout=60)


def test_anthropic_messages_are_trimmed_by_the_alias(trim_gateway, sim):
    turns = [m for m in long_conversation() if m["role"] != "system"]
    body = {"max_tokens": 64, "system": "You answer briefly.", "messages": turns}
    raw = claude(trim_gateway).messages.with_raw_response.create(model=CLAUDE_ALIAS, **body)
    message = raw.parse()
    assert message.content[0].type == "text" and message.content[0].text
    conv = conversation(Endpoint.MESSAGES, body)
    assert conv is not None
    expected = fit(conv.messages, window=WINDOW, max_tokens=64, policy=TrimPolicy.DROP_OLDEST,
                   model="claude-haiku-4-5", turn_pairs=True)
    row = ledger_row(trim_gateway, raw.headers["x-costgate-request-id"])
    assert row["endpoint"] == "messages" and row["status"] == "ok"
    assert row["model"] == SMALL_CLAUDE and row["provider"] == "anthropic"
    assert row["trimmed_tokens"] == expected.dropped_tokens > 0
    assert row["prompt_tokens"] < estimate_prompt_tokens(estimate_messages(body))
    # natively to the sim's Anthropic route, opening on the user's turn
    recent = sim.recent_requests()[-1]
    assert recent["model"] == "claude-haiku-4-5"


def test_anthropic_messages_over_the_window_are_a_400(trim_gateway, sim):
    turns = [m for m in long_conversation() if m["role"] != "system"]
    with pytest.raises(anthropic.BadRequestError) as err:
        claude(trim_gateway).messages.create(model=SMALL_CLAUDE, max_tokens=64, messages=turns)
    assert err.value.status_code == 400
    assert f"maximum context length is {WINDOW} tokens" in err.value.message
    row = ledger_row(trim_gateway, err.value.response.headers["x-costgate-request-id"])
    assert row["error_class"] == "context_length_exceeded" and row["endpoint"] == "messages"
