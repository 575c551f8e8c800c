"""Attempts the provider started and never finished, against the real sim over HTTP: a
stream the upstream cuts after part of its answer, a body that never comes before the
timeout. Each leaves one row priced above $0 (the prompt at least, the output seen so
far) and settles the app's budget at that cost, not at $0."""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import httpx
import pytest

from gateway.domain.budgets import Budget, BudgetPeriod, BudgetScope
from gateway.domain.usage_record import RequestStatus, UsageSource
from gateway.quota.budget_slice import BudgetSlice
from gateway.quota.guard import Who

MESSAGES = [{"role": "user", "content": "Tell me a long story about the harbour of Porto."}]
PINNED = {"x-costgate-no-fallback": "true"}
BUDGET_IDS = itertools.count(991)  # a slice of its own per test: the guard keeps slices


@pytest.fixture
def budgeted(gw: Any) -> Iterator[tuple[Any, BudgetSlice]]:
    """The plain gateway with a hard $1 day budget on its app, held whole by this replica
    (as a lease sync grants it); the budgets it had before, after."""
    quota = gw.service.quota
    saved = quota.budgets
    resp = httpx.post(gw.base_url + "/v1/chat/completions", headers=gw.headers, timeout=30,
                      json={"model": "gpt-4o", "messages": MESSAGES, "max_tokens": 5})
    assert resp.status_code == 200
    (first,) = gw.wait_records(1)  # whose app the plain gateway's key is
    gw.records.clear()
    budget = Budget(id=next(BUDGET_IDS), scope=BudgetScope.APP, scope_value=first.app,
                    period=BudgetPeriod.DAY, limit_usd=Decimal("1"), hard=True)
    quota.replace_budgets([budget])
    slice_ = quota._slice(budget, dt.datetime.now(dt.UTC), Who(first.app, first.team, None))
    slice_.held = budget.limit_usd
    yield gw, slice_
    quota.replace_budgets(saved)


def test_a_stream_cut_by_the_upstream_is_priced_at_its_prompt_and_output_so_far(budgeted, sim):
    gw, held = budgeted
    sim.set_fault("gpt-4o", "mid_stream_reset")
    with httpx.stream("POST", gw.base_url + "/v1/chat/completions", timeout=60,
                      headers={**PINNED, **gw.headers},
                      json={"model": "gpt-4o", "messages": MESSAGES, "stream": True,
                            "max_tokens": 200}) as resp:  # fmt: skip
        assert resp.status_code == 200  # the stream had begun: the cut arrives in it
        body = b"".join(resp.iter_bytes())
    assert b"delta" in body
    (record,) = gw.wait_records(1)
    assert record.status is not RequestStatus.OK
    assert record.usage_source is UsageSource.ESTIMATED
    assert record.prompt_tokens and record.completion_tokens  # the output seen counts too
    assert record.actual_cost_usd is not None and record.actual_cost_usd > 0
    assert held.in_use == 0 and held.unreported == record.actual_cost_usd


def test_a_timeout_is_priced_at_its_prompt_and_settles_the_budget(budgeted, sim):
    gw, held = budgeted
    sim.set_fault("gpt-4o", "hang")
    resp = httpx.post(gw.base_url + "/v1/chat/completions", timeout=60,
                      headers={**PINNED, **gw.headers},
                      json={"model": "gpt-4o", "messages": MESSAGES, "max_tokens": 200})
    assert resp.status_code == 504 and resp.json()["error"]["code"] == "timeout"
    (record,) = gw.wait_records(1)
    assert record.status is RequestStatus.UPSTREAM_ERROR and record.error_class == "timeout"
    assert record.usage_source is UsageSource.ESTIMATED and record.prompt_tokens
    assert record.actual_cost_usd is not None and record.actual_cost_usd > 0
    assert held.in_use == 0 and held.unreported == record.actual_cost_usd
