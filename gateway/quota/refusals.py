"""What a refused client is told, in OpenAI's shape: 429 `insufficient_quota` /
`budget_exceeded` for a budget, 429 `rate_limit_exceeded` with OpenAI's
`x-ratelimit-*` headers for a key's rpm or tpm. Pure.

A budget's refusal names that budget's scope, period and limit and says what is left of
it and when it resets; nothing about spend elsewhere. `x-should-retry: false` tells the
official SDKs not to retry what only a new period or a raised limit can cure.
"""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal

from gateway.domain.budgets import Budget
from gateway.domain.openai_errors import OpenAIError
from gateway.routing.rate_limits import BucketSlice

BUDGET_LIMIT_HEADER = "x-costgate-budget-limit-usd"
BUDGET_REMAINING_HEADER = "x-costgate-budget-remaining-usd"
BUDGET_RESET_HEADER = "x-costgate-budget-reset"


def _usd(amount: Decimal) -> str:
    return format(max(Decimal(0), amount).normalize(), "f")


def budget_headers(budget: Budget, remaining: Decimal, end: dt.datetime) -> dict[str, str]:
    return {
        BUDGET_LIMIT_HEADER: _usd(budget.limit_usd),
        BUDGET_REMAINING_HEADER: _usd(remaining),
        BUDGET_RESET_HEADER: end.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def budget_exceeded(budget: Budget, remaining: Decimal, end: dt.datetime) -> OpenAIError:
    reset = end.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return OpenAIError(
        429,
        f"This request would exceed {budget.describe()}. It resets at {reset}.",
        type_="insufficient_quota",
        code="budget_exceeded",
        headers=budget_headers(budget, remaining, end) | {"x-should-retry": "false"},
    )


def budget_unpriceable(budget: Budget, why: str) -> OpenAIError:
    """A hard budget admits only what it can price: never a request at $0."""
    return OpenAIError(
        429,
        f"This request's cost cannot be bounded ({why}), so {budget.describe()} refuses it.",
        type_="insufficient_quota",
        code="budget_unpriceable",
        headers={"x-should-retry": "false"},
    )


def budgets_unavailable() -> OpenAIError:
    """The budget store cannot be reached and this replica holds nothing for the request:
    never admitted without a limit."""
    return OpenAIError(
        503,
        "Budgets cannot be checked right now (the budget store is unreachable); retry "
        "shortly.",
        type_="service_unavailable",
        code="budgets_unavailable",
        headers={"retry-after": "2"},
    )


def duration(seconds: float) -> str:
    """OpenAI's reset format: "20ms", "1.5s", "6m0s"."""
    if seconds < 1:
        return f"{max(0, math.ceil(seconds * 1000))}ms"
    if seconds < 60:
        return f"{math.ceil(seconds * 10) / 10:g}s"
    minutes, rest = divmod(math.ceil(seconds), 60)
    return f"{minutes}m{rest}s"


def rate_headers(requests: BucketSlice | None, tokens: BucketSlice | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for kind, s in (("requests", requests), ("tokens", tokens)):
        if s is not None:
            out[f"x-ratelimit-limit-{kind}"] = str(s.capacity)
            out[f"x-ratelimit-remaining-{kind}"] = str(math.floor(s.remaining()))
            out[f"x-ratelimit-reset-{kind}"] = duration(s.reset_s())
    return out


def rate_limited(
    kind: str,
    limit: int,
    wait_s: float,
    requests: BucketSlice | None,
    tokens: BucketSlice | None,
    *,
    whose: str = "this gateway key",
) -> OpenAIError:
    """`kind`: "requests" or "tokens" (OpenAI's error `type` for these refusals); `whose`:
    the limit's holder in words ("this end user": never which one, nor anyone else's)."""
    unit = "requests" if kind == "requests" else "tokens"
    return OpenAIError(
        429,
        f"Rate limit reached for {whose}: {limit} {unit} per minute. "
        f"Please try again in {duration(wait_s)}.",
        type_=kind,
        code="rate_limit_exceeded",
        headers=rate_headers(requests, tokens) | {"retry-after": str(max(1, math.ceil(wait_s)))},
    )
