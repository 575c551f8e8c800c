"""Only failures a second try can fix are retried, with bounded, jittered waits."""

from __future__ import annotations

import datetime as dt
import json
import random

import httpx
import pytest

from gateway.domain.routing_settings import RetrySettings
from gateway.routing.retry_policy import (
    FailureReason,
    NextStep,
    backoff_delay,
    classify,
    decide_next,
    parse_retry_after,
)


@pytest.mark.parametrize(
    ("outcome", "reason", "retryable"),
    [
        (429, FailureReason.RATE_LIMITED, True),
        (500, FailureReason.UPSTREAM_5XX, True),
        (502, FailureReason.UPSTREAM_5XX, True),
        (503, FailureReason.UPSTREAM_5XX, True),
        (504, FailureReason.UPSTREAM_5XX, True),
        (501, FailureReason.UPSTREAM_OTHER_5XX, False),
        (400, FailureReason.BAD_REQUEST, False),
        (422, FailureReason.BAD_REQUEST, False),
        (401, FailureReason.UPSTREAM_AUTH, False),
        (404, FailureReason.NOT_FOUND, False),
        (408, FailureReason.UPSTREAM_4XX, False),
        (409, FailureReason.UPSTREAM_4XX, False),
        (httpx.ReadTimeout("slow"), FailureReason.TIMEOUT, True),
        (httpx.ConnectTimeout("slow"), FailureReason.TIMEOUT, True),
        (TimeoutError(), FailureReason.TIMEOUT, True),
        (httpx.ConnectError("refused"), FailureReason.CONNECT_ERROR, True),
        (httpx.RemoteProtocolError("peer closed"), FailureReason.RESET, True),
        (httpx.ReadError("reset"), FailureReason.RESET, True),
        (ConnectionResetError(), FailureReason.RESET, True),
        (json.JSONDecodeError("bad", "x", 0), FailureReason.MALFORMED, False),
        (RuntimeError("?"), FailureReason.OTHER, False),
    ],
)
def test_classification(outcome, reason, retryable) -> None:
    verdict = classify(outcome)
    assert verdict is not None
    assert (verdict.reason, verdict.retryable) == (reason, retryable)


def test_success_has_no_verdict() -> None:
    assert classify(200) is None
    assert classify(204) is None


def test_a_bad_request_is_not_held_against_the_upstreams_health() -> None:
    assert classify(400).affects_health is False  # type: ignore[union-attr]
    assert classify(503).affects_health is True  # type: ignore[union-attr]


def test_retry_after_reads_seconds_and_http_dates() -> None:
    now = dt.datetime(2026, 11, 29, 12, 0, 0, tzinfo=dt.UTC)
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after(" 1.5 ") == 1.5
    assert parse_retry_after("Sun, 29 Nov 2026 12:00:07 GMT", now) == 7.0
    assert parse_retry_after("Sun, 29 Nov 2026 11:00:00 GMT", now) == 0.0
    assert parse_retry_after("-4") == 0.0
    for junk in (None, "", "soon", "nan", "inf"):
        assert parse_retry_after(junk) is None


def test_backoff_stays_within_the_exponential_ceiling() -> None:
    settings = RetrySettings(base_delay_s=0.1, max_delay_s=1.0)
    rng = random.Random(5)
    for attempt, ceiling in [(1, 0.1), (2, 0.2), (3, 0.4), (4, 0.8), (5, 1.0), (9, 1.0)]:
        delays = [backoff_delay(attempt, None, rng, settings) for _ in range(2000)]
        assert min(delays) >= 0.0 and max(delays) <= ceiling
        # full jitter: spread over the whole range, not bunched at the top
        assert min(delays) < ceiling * 0.05 and max(delays) > ceiling * 0.95


def test_backoff_honours_retry_after_up_to_the_cap() -> None:
    settings = RetrySettings(base_delay_s=0.1, max_delay_s=1.0, retry_after_cap_s=2.0)
    rng = random.Random(1)
    assert all(backoff_delay(1, 1.5, rng, settings) == 1.5 for _ in range(100))
    assert backoff_delay(1, 30.0, rng, settings) == 2.0
    with pytest.raises(ValueError):
        backoff_delay(0, None, rng, settings)


def decide(outcome, **kw):
    args = dict(
        attempts_made=1,
        attempts_on_model=1,
        models_left=2,
        retry_after=None,
        client_has_bytes=False,
        rng=random.Random(0),
        settings=RetrySettings(max_attempts=3, max_attempts_per_model=2),
    )
    args.update(kw)
    verdict = classify(outcome)
    assert verdict is not None
    return decide_next(verdict, **args)


def test_a_400_is_given_back_at_once() -> None:
    assert decide(400).step is NextStep.GIVE_UP


def test_a_503_is_retried_on_the_same_model_then_moves_on() -> None:
    assert decide(503).step is NextStep.RETRY_SAME
    assert decide(503, attempts_made=2, attempts_on_model=2).step is NextStep.NEXT_MODEL
    assert decide(503, attempts_made=3, attempts_on_model=1).step is NextStep.GIVE_UP


def test_a_long_retry_after_moves_to_the_next_model_instead_of_waiting() -> None:
    assert decide(429, retry_after=30.0).step is NextStep.NEXT_MODEL
    assert decide(429, retry_after=30.0, models_left=0).step is NextStep.GIVE_UP
    short = decide(429, retry_after=0.5)
    assert (short.step, short.delay_s) == (NextStep.RETRY_SAME, 0.5)


def test_a_stream_that_reached_the_client_is_never_retried() -> None:
    assert decide(httpx.ReadError("x"), client_has_bytes=True).step is NextStep.GIVE_UP
