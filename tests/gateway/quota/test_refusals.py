"""Refusals in OpenAI's shape, with the headers clients read."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from gateway.domain.budgets import Budget, BudgetPeriod, BudgetScope
from gateway.quota.refusals import budget_exceeded, duration, rate_limited
from gateway.routing.rate_limits import BucketSlice


def test_a_budget_refusal_names_its_budget_and_reset_only() -> None:
    b = Budget(3, BudgetScope.TEAM, "payments", BudgetPeriod.MONTH, Decimal(50), True)
    end = dt.datetime(2027, 1, 1, tzinfo=dt.UTC)
    err = budget_exceeded(b, Decimal("0.1234"), end)
    body = err.body()["error"]
    assert (err.status, body["type"], body["code"]) == (
        429,
        "insufficient_quota",
        "budget_exceeded",
    )
    assert body["message"] == (
        "This request would exceed the monthly budget of $50.00 on team 'payments'. "
        "It resets at 2027-01-01 00:00 UTC."
    )
    assert err.headers == {
        "x-costgate-budget-limit-usd": "50",
        "x-costgate-budget-remaining-usd": "0.1234",
        "x-costgate-budget-reset": "2027-01-01T00:00:00Z",
        "x-should-retry": "false",
    }


def test_a_rate_refusal_carries_openais_headers() -> None:
    clock = lambda: 100.0  # noqa: E731
    requests = BucketSlice("key:k:rpm", 20, clock=clock, shared=True)
    requests.end_sync(granted=0, level=0)
    err = rate_limited("requests", 20, 3.0, requests, None)
    assert (err.status, err.type, err.code) == (429, "requests", "rate_limit_exceeded")
    assert err.headers == {
        "x-ratelimit-limit-requests": "20",
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "1m0s",
        "retry-after": "3",
    }


@pytest.mark.parametrize(
    ("seconds", "text"), [(0.02, "20ms"), (1.5, "1.5s"), (59.99, "60s"), (360, "6m0s")]
)
def test_durations_read_like_openais(seconds: float, text: str) -> None:
    assert duration(seconds) == text
