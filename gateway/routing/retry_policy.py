"""Which upstream failures are worth another attempt, and how long to wait before it.

Pure: the upstream client reports what happened (an HTTP status or the exception
httpx raised), and this module answers with a `Verdict` in a bounded vocabulary that
the usage record (`error_class`), the metrics and the circuit breaker share.

Only failures that a second try can fix are retried: 429 (honouring Retry-After up to
a cap), 500/502/503/504, timeouts, connection errors and resets. Every other 4xx is the
request's own fault and goes back to the client unchanged; another upstream would
refuse it the same way.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import email.utils
import json
import math
import random
from enum import StrEnum

import httpx

from gateway.domain.routing_settings import RetrySettings


class FailureReason(StrEnum):
    RATE_LIMITED = "rate_limited"  # 429
    UPSTREAM_5XX = "upstream_5xx"  # 500/502/503/504
    UPSTREAM_OTHER_5XX = "upstream_other_5xx"  # 501, 505..599: retrying will not help
    TIMEOUT = "timeout"  # connect, read, write or pool timeout
    CONNECT_ERROR = "connect_error"  # refused, DNS, TLS: the request never left
    RESET = "reset"  # the connection broke mid-response
    MALFORMED = "malformed"  # a 2xx whose body is not what the API promises
    BAD_REQUEST = "bad_request"  # 400, 413, 422: the request itself is wrong
    UPSTREAM_AUTH = "upstream_auth"  # 401/403: the gateway's provider key is wrong
    NOT_FOUND = "not_found"  # 404: the upstream model id is wrong
    UPSTREAM_4XX = "upstream_4xx"  # any other 4xx
    OTHER = "other"  # an exception we do not know


# failures after which the provider may have billed the attempt: the request reached it
# and it may have generated (a timeout, a broken connection, a 5xx, a 200 we could not
# read). A 429, a 4xx, an overload refusal (503, 529) or a connection that never opened
# bills nothing.
BILLABLE_FAILURES = frozenset({
    FailureReason.TIMEOUT, FailureReason.RESET, FailureReason.UPSTREAM_5XX,
    FailureReason.UPSTREAM_OTHER_5XX, FailureReason.MALFORMED, FailureReason.OTHER,
})  # fmt: skip
UNBILLED_STATUSES = frozenset({503, 529})


def may_be_billed(reason: FailureReason, status: int | None) -> bool:
    """Whether a failed attempt may still be on the provider's bill."""
    return reason in BILLABLE_FAILURES and status not in UNBILLED_STATUSES


@dataclasses.dataclass(frozen=True, slots=True)
class Verdict:
    reason: FailureReason
    retryable: bool
    # counts as a failure in the circuit breaker's window: the upstream misbehaved,
    # as opposed to a request that would fail anywhere
    affects_health: bool


# 529: Anthropic's "overloaded", its 503
_RETRY_STATUSES = {500, 502, 503, 504, 529}


def classify(outcome: int | BaseException) -> Verdict | None:
    """The verdict on one attempt: an HTTP status or the exception it raised.

    None means success (a status below 400).
    """
    if isinstance(outcome, BaseException):
        return _classify_exception(outcome)
    status = outcome
    if status < 400:
        return None
    if status == 429:
        return Verdict(FailureReason.RATE_LIMITED, retryable=True, affects_health=True)
    if status in _RETRY_STATUSES:
        return Verdict(FailureReason.UPSTREAM_5XX, retryable=True, affects_health=True)
    if status >= 500:
        return Verdict(FailureReason.UPSTREAM_OTHER_5XX, retryable=False, affects_health=True)
    if status in (401, 403):
        # every request with this key fails: the breaker should take the model out
        return Verdict(FailureReason.UPSTREAM_AUTH, retryable=False, affects_health=True)
    if status == 404:
        return Verdict(FailureReason.NOT_FOUND, retryable=False, affects_health=True)
    if status in (400, 413, 422):
        return Verdict(FailureReason.BAD_REQUEST, retryable=False, affects_health=False)
    return Verdict(FailureReason.UPSTREAM_4XX, retryable=False, affects_health=False)


def _classify_exception(exc: BaseException) -> Verdict:
    # order matters: ConnectTimeout is both a TimeoutException and a "connect" failure;
    # it is reported as a timeout, and it is retryable either way
    if isinstance(exc, httpx.TimeoutException | TimeoutError):
        return Verdict(FailureReason.TIMEOUT, retryable=True, affects_health=True)
    if isinstance(exc, httpx.ConnectError | ConnectionRefusedError):
        return Verdict(FailureReason.CONNECT_ERROR, retryable=True, affects_health=True)
    if isinstance(
        exc,
        httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError | ConnectionError,
    ):
        return Verdict(FailureReason.RESET, retryable=True, affects_health=True)
    if isinstance(exc, json.JSONDecodeError | httpx.DecodingError | UnicodeDecodeError):
        # not in the retryable list: a second call would be billed again for an answer
        # that may come back just as broken; the fallback chain is not tried either
        return Verdict(FailureReason.MALFORMED, retryable=False, affects_health=True)
    return Verdict(FailureReason.OTHER, retryable=False, affects_health=True)


def parse_retry_after(value: str | None, now: dt.datetime | None = None) -> float | None:
    """Seconds to wait from a Retry-After header: delta-seconds or an HTTP date.

    None when absent or unreadable; never negative.
    """
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.UTC)
        now = now or dt.datetime.now(dt.UTC)
        seconds = (when - now).total_seconds()
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


def backoff_delay(
    attempt: int,
    retry_after: float | None,
    rng: random.Random,
    settings: RetrySettings = RetrySettings(),  # noqa: B008 - frozen, shared safely
) -> float:
    """Seconds to sleep before retry number `attempt` (1 = the first retry).

    Exponential backoff with full jitter, so that replicas retrying the same upstream
    spread out instead of hitting it again in step. A Retry-After is a floor, capped at
    `retry_after_cap_s`.
    """
    if attempt < 1:
        raise ValueError("attempt counts retries from 1")
    ceiling = min(settings.max_delay_s, settings.base_delay_s * 2 ** (attempt - 1))
    delay = rng.uniform(0.0, ceiling) if ceiling > 0 else 0.0
    if retry_after is not None:
        delay = max(delay, min(retry_after, settings.retry_after_cap_s))
    return delay


class NextStep(StrEnum):
    RETRY_SAME = "retry_same"  # the same model again, after `delay_s`
    NEXT_MODEL = "next_model"  # the next model of the plan, at once
    GIVE_UP = "give_up"  # return this failure to the client


@dataclasses.dataclass(frozen=True, slots=True)
class RetryDecision:
    step: NextStep
    delay_s: float = 0.0


def decide_next(
    verdict: Verdict,
    *,
    attempts_made: int,
    attempts_on_model: int,
    models_left: int,
    retry_after: float | None,
    client_has_bytes: bool,
    rng: random.Random,
    settings: RetrySettings = RetrySettings(),  # noqa: B008 - frozen, shared safely
) -> RetryDecision:
    """What the request path does after a failed attempt.

    `attempts_made` counts every attempt of this client request so far (including the
    one that failed), `attempts_on_model` those on the model that just failed, and
    `models_left` how many models of the plan are still untried.
    """
    if not verdict.retryable or client_has_bytes:
        # a stream whose first byte reached the client cannot be replayed
        return RetryDecision(NextStep.GIVE_UP)
    if attempts_made >= settings.max_attempts:
        return RetryDecision(NextStep.GIVE_UP)
    too_long = retry_after is not None and retry_after > settings.retry_after_cap_s
    if attempts_on_model < settings.max_attempts_per_model and not too_long:
        delay = backoff_delay(attempts_on_model, retry_after, rng, settings)
        return RetryDecision(NextStep.RETRY_SAME, delay)
    if models_left > 0:
        return RetryDecision(NextStep.NEXT_MODEL)
    if too_long:
        return RetryDecision(NextStep.GIVE_UP)
    delay = backoff_delay(attempts_on_model, retry_after, rng, settings)
    return RetryDecision(NextStep.RETRY_SAME, delay)
