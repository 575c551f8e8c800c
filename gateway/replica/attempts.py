"""The attempt loop: a route plan's models in order, each retried as the retry policy
says, each behind its circuit breaker; and what the client is told when all fail.

The loop knows nothing of the wire format or of streaming: `call` makes one attempt on
one model and either returns what the caller needs or raises `UpstreamFailure`. That is
what lets the same loop serve plain and streamed requests (and, later, other APIs).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from gateway.domain.config import Config, Model
from gateway.domain.openai_errors import OpenAIError
from gateway.domain.routing_settings import RetrySettings
from gateway.providers.client import UpstreamFailure
from gateway.replica.exchange import AttemptHooks, Exchange
from gateway.routing.circuit_breaker import BreakerBoard
from gateway.routing.rate_limits import RateLimiter
from gateway.routing.retry_policy import (
    FailureReason,
    NextStep,
    decide_next,
    may_be_billed,
)

T = TypeVar("T")


async def run_attempts(
    ex: Exchange,
    call: Callable[[Model], Awaitable[T]],
    *,
    cfg: Config,
    retry: RetrySettings,
    breakers: BreakerBoard,
    limits: RateLimiter,
    hooks: AttemptHooks,
    rng: random.Random,
) -> T:
    """The first success of `call` along the plan; `OpenAIError` when none succeeds."""
    assert ex.plan is not None
    models = ex.plan.models
    last: UpstreamFailure | None = None
    for index, name in enumerate(models):
        model = cfg.models_by_name[name]
        breaker = breakers.get(model.provider, name)
        on_model = 0
        if ex.path and ex.path[-1] != name:
            hooks.fallback(ex.path[-1], name)
        while True:
            if not breaker.allow():
                break  # open, or its one half-open probe is out: the next model
            ex.attempts += 1
            on_model += 1
            ex.path.append(name)
            ex.model = model
            limits.record_request(name, ex.reserved_tokens)
            started = time.perf_counter()
            try:
                result = await call(model)
            except UpstreamFailure as failure:
                last = failure
                limits.settle_tokens(name, ex.reserved_tokens, 0)  # this attempt used none
                if may_be_billed(failure.verdict.reason, failure.status):
                    ex.billed_failures += 1  # its prompt counts in the record
                if failure.verdict.affects_health:
                    breaker.record_failure()
                else:
                    breaker.release()
                hooks.attempt(name, model.provider, failure.reason)
                hooks.breaker(model.provider, name, int(breaker.state))
                step = decide_next(
                    failure.verdict,
                    attempts_made=ex.attempts,
                    attempts_on_model=on_model,
                    models_left=len(models) - index - 1,
                    retry_after=failure.retry_after,
                    client_has_bytes=False,
                    rng=rng,
                    settings=retry,
                )
                if step.step is NextStep.RETRY_SAME:
                    hooks.retry(name, model.provider, failure.reason)
                    await asyncio.sleep(step.delay_s)
                    continue
                if step.step is NextStep.NEXT_MODEL:
                    break
                raise client_error(failure) from None
            except BaseException:
                breaker.release()  # cancelled: neither a success nor the upstream's fault
                raise
            breaker.record_success()
            hooks.attempt(name, model.provider, "ok")
            hooks.breaker(model.provider, name, int(breaker.state))
            ex.upstream_ms = int((time.perf_counter() - started) * 1000)
            return result
    if last is not None:
        raise client_error(last)
    raise OpenAIError(
        503,
        f"No upstream for {ex.requested!r} is available right now "
        "(circuit breakers open); retry shortly.",
        code="upstream_unavailable",
        headers={"retry-after": "5"},
    )


def client_error(failure: UpstreamFailure) -> OpenAIError:
    """The OpenAI-shaped error for the client: an upstream 4xx passes on as it was (the
    request's own fault), everything else becomes 429, 504 or 502 in our words."""
    reason = failure.verdict.reason
    if failure.error_body is not None and failure.status and 400 <= failure.status < 500:
        err = failure.error_body["error"]
        return OpenAIError(
            failure.status,
            str(err.get("message") or failure.message),
            code=err.get("code") if isinstance(err.get("code"), str) else reason.value,
            param=err.get("param") if isinstance(err.get("param"), str) else None,
            type_=err.get("type") if isinstance(err.get("type"), str) else None,
        )
    if reason is FailureReason.RATE_LIMITED:
        wait = max(1, int(failure.retry_after or 1))
        return OpenAIError(
            429,
            f"Upstream rate limit: {failure.message}. Retry after {wait} s.",
            code=reason.value,
            headers={"retry-after": str(wait)},
        )
    if reason is FailureReason.TIMEOUT:
        return OpenAIError(504, f"Upstream timed out: {failure.message}.", code=reason.value)
    return OpenAIError(502, f"Upstream error: {failure.message}.", code=reason.value)
