"""Anthropic's Message Batches through the deployed gateway with the anthropic SDK: the
results per request, a line the provider failed, and one ledger row per request."""

from __future__ import annotations

import time
from decimal import Decimal
from typing import Any

import anthropic
import httpx
import pytest

from tests.fixtures.gateway import RunningGateway
from tests.gateway.batches.test_openai_batches_served import _app, _rows

pytestmark = pytest.mark.ray
MODEL = "claude-haiku-4.5"


def _request(i: int) -> dict[str, Any]:
    return {"custom_id": f"m-{i}", "params": {
        "model": MODEL, "max_tokens": 64,
        "messages": [{"role": "user", "content": f"Tell me {i}."}]}}


def test_the_anthropic_sdk_message_batch_flow_with_a_failed_line(
    gateway: RunningGateway, sim: Any
) -> None:
    httpx.put(sim.base_url + "/_sim/batches", json={"failed_custom_ids": ["m-2"]}, timeout=10)
    app, key = _app(gateway)
    client = anthropic.Anthropic(base_url=gateway.base_url, api_key=key, max_retries=0)
    batch = client.messages.batches.create(requests=[_request(i) for i in range(4)])
    assert batch.processing_status == "in_progress"
    deadline = time.monotonic() + 60
    while batch.processing_status != "ended" and time.monotonic() < deadline:
        time.sleep(0.3)
        batch = client.messages.batches.retrieve(batch.id)
    assert batch.processing_status == "ended", batch
    assert (batch.request_counts.succeeded, batch.request_counts.errored) == (3, 1)
    results = {r.custom_id: r.result for r in client.messages.batches.results(batch.id)}
    assert sorted(results) == ["m-0", "m-1", "m-2", "m-3"]
    assert results["m-2"].type == "errored"
    for i in (0, 1, 3):
        result = results[f"m-{i}"]
        assert result.type == "succeeded" and result.message.model == MODEL
        assert result.message.content

    rows = {r.custom_id: r for r in _rows(gateway, batch.id)}
    assert sorted(rows) == ["m-0", "m-1", "m-2", "m-3"]
    failed = rows.pop("m-2")
    assert (failed.status, failed.actual_cost_usd) == ("upstream_error", None)
    for r in rows.values():
        assert (r.endpoint, r.app, r.provider, r.status) == ("batch", app, "anthropic", "ok")
        assert r.actual_cost_usd == (r.list_cost_usd / 2).quantize(Decimal("1E-10")) > 0
    assert [b.id for b in client.messages.batches.list()] == [batch.id]

    other_key = _app(gateway)[1]
    other = anthropic.Anthropic(base_url=gateway.base_url, api_key=other_key, max_retries=0)
    with pytest.raises(anthropic.NotFoundError):
        other.messages.batches.retrieve(batch.id)
    with pytest.raises(anthropic.NotFoundError):
        list(other.messages.batches.results(batch.id))
