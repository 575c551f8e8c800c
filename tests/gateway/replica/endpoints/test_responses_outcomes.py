"""How a Responses answer's own status lands in the ledger, with exact upstream events
(`httpx.MockTransport`): usage from the terminal event, whichever it is; a `failed`
response is the upstream's error but keeps its (billed) usage; a stream cut before its
terminal event is an upstream error with its usage estimated."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from gateway.domain.endpoints import Endpoint
from gateway.domain.usage_record import RequestStatus, UsageSource
from tests.gateway.replica.test_service import (  # noqa: F401 - the fixtures
    Chunks,
    harness_for,
    provider_keys,
)

USAGE = {"input_tokens": 40, "input_tokens_details": {"cached_tokens": 0},
         "output_tokens": 9, "output_tokens_details": {"reasoning_tokens": 4},
         "total_tokens": 49}
BODY = {"model": "gpt-4.1-mini", "input": "Hello", "stream": True}
PINNED = {"x-costgate-no-fallback": "true"}


def named(*events: dict[str, Any]) -> list[bytes]:
    return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]


def stream(terminal: str | None) -> list[bytes]:
    events = [{"type": "response.created", "response": {"model": "up", "status": "in_progress"}},
              {"type": "response.output_text.delta", "delta": "Hi there"}]
    if terminal is not None:
        status = terminal.split(".")[1]
        events.append({"type": terminal,
                       "response": {"model": "up", "status": status, "usage": USAGE}})
    return named(*events)


@pytest.mark.parametrize(
    ("terminal", "status", "error_class"),
    [
        ("response.completed", RequestStatus.OK, None),
        ("response.incomplete", RequestStatus.OK, None),
        ("response.failed", RequestStatus.UPSTREAM_ERROR, "response_failed"),
    ],
)
async def test_the_terminal_event_gives_the_usage_and_the_outcome(
    harness_for, terminal, status, error_class  # noqa: F811
):
    h = harness_for(lambda _: httpx.Response(200, stream=Chunks(stream(terminal))))
    resp = await h.client.post("/v1/responses", json=BODY, headers=PINNED)
    assert resp.status_code == 200
    assert f"event: {terminal}" in resp.text and "[DONE]" not in resp.text
    assert '"model":"gpt-4.1-mini"' in resp.text  # the name the app asked for
    (record,) = h.records
    assert record.endpoint is Endpoint.RESPONSES
    assert (record.status, record.error_class) == (status, error_class)
    assert record.usage_source is UsageSource.PROVIDER
    assert (record.prompt_tokens, record.completion_tokens, record.reasoning_tokens) == (
        40, 9, 4)
    assert record.actual_cost_usd is not None and record.actual_cost_usd > 0


async def test_a_stream_cut_before_its_terminal_event_is_estimated_and_an_error(
    harness_for,  # noqa: F811
):
    h = harness_for(lambda _: httpx.Response(200, stream=Chunks(stream(None), fail=True)))
    resp = await h.client.post("/v1/responses", json=BODY, headers=PINNED)
    assert "event: error" in resp.text
    (record,) = h.records
    assert record.status is RequestStatus.UPSTREAM_ERROR
    assert record.usage_source is UsageSource.ESTIMATED and record.completion_tokens > 0


async def test_a_plain_failed_response_is_relayed_and_recorded_as_the_upstreams_error(
    harness_for,  # noqa: F811
):
    body = {"object": "response", "status": "failed", "model": "up", "output": [],
            "error": {"code": "server_error", "message": "x"}, "usage": USAGE}
    h = harness_for(lambda _: httpx.Response(200, json=body))
    resp = await h.client.post("/v1/responses", json={**BODY, "stream": False}, headers=PINNED)
    assert resp.status_code == 200 and resp.json()["status"] == "failed"
    (record,) = h.records
    assert record.status is RequestStatus.UPSTREAM_ERROR and record.prompt_tokens == 40
