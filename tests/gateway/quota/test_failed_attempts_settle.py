"""A request the upstream started and never finished (a timeout after part of its answer,
a stream cut at its deadline) is priced at what the provider can bill, its prompt at
least and the output seen so far, and its budget reservation settles at that cost, not
at $0: the real GatewayService and app, the upstream an `httpx.MockTransport` (see
test_service.py), the budget this replica's local slice."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from decimal import Decimal

import httpx
import pytest

from gateway.domain.budgets import Budget, BudgetPeriod, BudgetScope
from gateway.domain.token_estimate import estimate_prompt_tokens
from gateway.domain.usage_record import RequestStatus, UsageSource
from gateway.quota.budget_slice import BudgetSlice
from gateway.quota.guard import Who
from tests.gateway.replica.test_service import (
    APP,
    MESSAGES,
    PINNED,
    SECRET,
    Chunks,
    Harness,
    completion,
    config_with,
    delta,
    sse,
)

BUDGET = Budget(id=7, scope=BudgetScope.APP, scope_value=APP.app, period=BudgetPeriod.DAY,
                limit_usd=Decimal("1"), hard=True)


class StallAfter(httpx.AsyncByteStream):
    """Part of a body, then nothing until the read times out."""

    def __init__(self, part: bytes) -> None:
        self.part = part

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.part
        raise httpx.ReadTimeout("no more bytes")


@pytest.fixture
def provider_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    for env in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "DEEPSEEK_API_KEY",
                "RELAY_API_KEY"):
        monkeypatch.setenv(env, SECRET)


def budgeted(h: Harness) -> BudgetSlice:
    """The app's hard budget, its whole limit held by this replica (as a sync grants)."""
    h.service.quota.replace_budgets([BUDGET])
    s = h.service.quota._slice(BUDGET, dt.datetime.now(dt.UTC), Who(APP.app, APP.team, None))
    s.held = BUDGET.limit_usd
    return s


@pytest.mark.usefixtures("provider_secrets")
async def test_a_timeout_after_part_of_the_answer_is_priced_and_settles_the_budget() -> None:
    part = b'{"id": "chatcmpl-1", "object": "chat.completion", "choices": [{"index": 0, '
    h = Harness(lambda _: httpx.Response(200, stream=StallAfter(part)))
    try:
        s = budgeted(h)
        resp = await h.chat({"model": "gpt-4.1", "messages": MESSAGES, "max_tokens": 100},
                            **PINNED)
        assert resp.status_code == 504
        [record] = h.records
        assert record.status is RequestStatus.UPSTREAM_ERROR and record.error_class == "timeout"
        assert record.usage_source is UsageSource.ESTIMATED
        assert record.actual_cost_usd is not None and record.actual_cost_usd > 0
        # the reservation is gone and the budget counts the attempt's cost, not $0
        assert s.in_use == 0 and s.unreported == record.actual_cost_usd
    finally:
        await h.aclose()


@pytest.mark.usefixtures("provider_secrets")
async def test_a_stream_cut_at_its_deadline_settles_at_its_prompt_and_output_so_far() -> None:
    parts = sse(*[delta("tick") for _ in range(50)], "[DONE]")
    h = Harness(lambda _: httpx.Response(200, stream=Chunks(parts, gap_s=0.05)),
                config_with(stream_total=0.3))
    try:
        s = budgeted(h)
        resp = await h.chat({"model": "gpt-4.1", "messages": MESSAGES, "max_tokens": 100,
                             "stream": True}, **PINNED)
        assert "deadline" in resp.text
        [record] = h.records
        assert record.error_class == "stream_deadline"
        assert record.usage_source is UsageSource.ESTIMATED
        assert record.completion_tokens is not None and record.completion_tokens > 0
        assert record.actual_cost_usd is not None and record.actual_cost_usd > 0
        assert s.in_use == 0 and s.unreported == record.actual_cost_usd
    finally:
        await h.aclose()


@pytest.mark.usefixtures("provider_secrets")
async def test_an_attempt_that_timed_out_before_a_retry_answered_is_billed_too() -> None:
    calls: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        if len(calls) == 1:
            raise httpx.ReadTimeout("slow", request=request)
        return httpx.Response(200, json=completion())  # 12 prompt, 3 completion tokens

    h = Harness(handler)
    try:
        s = budgeted(h)
        resp = await h.chat({"model": "gpt-4.1", "messages": MESSAGES, "max_tokens": 100},
                            **PINNED)
        assert resp.status_code == 200 and len(calls) == 2
        [record] = h.records
        assert record.status is RequestStatus.OK and record.attempts == 2
        # the answer's own usage, plus the timed-out attempt's prompt, estimated
        one = estimate_prompt_tokens(MESSAGES)
        assert (record.prompt_tokens, record.completion_tokens) == (12 + one, 3)
        assert record.usage_source is UsageSource.ESTIMATED
        assert s.in_use == 0 and s.unreported == record.actual_cost_usd
    finally:
        await h.aclose()
