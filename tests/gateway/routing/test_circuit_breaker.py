"""The breaker opens on an error rate, probes once when half-open, and closes on success."""

from __future__ import annotations

from gateway.domain.routing_settings import BreakerSettings
from gateway.routing.circuit_breaker import BreakerBoard, BreakerState, CircuitBreaker


class FakeClock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


SETTINGS = BreakerSettings(
    window_s=10, min_requests=5, error_rate=0.5, cooldown_s=3, probe_timeout_s=20
)


def fail(b: CircuitBreaker, n: int) -> None:
    for _ in range(n):
        assert b.allow()
        b.record_failure()


def succeed(b: CircuitBreaker, n: int) -> None:
    for _ in range(n):
        assert b.allow()
        b.record_success()


def test_stays_closed_below_the_minimum_number_of_requests() -> None:
    b = CircuitBreaker(SETTINGS, FakeClock())
    fail(b, 4)
    assert b.state is BreakerState.CLOSED


def test_opens_when_the_error_rate_reaches_the_threshold() -> None:
    b = CircuitBreaker(SETTINGS, FakeClock())
    succeed(b, 3)
    fail(b, 2)
    assert b.state is BreakerState.CLOSED  # 2 of 5 = 40%
    fail(b, 1)
    assert b.state is BreakerState.OPEN  # 3 of 6 = 50%
    assert not b.allow()
    assert b.opened_count == 1


def test_a_low_error_rate_never_opens_it() -> None:
    b = CircuitBreaker(SETTINGS, FakeClock())
    for _ in range(200):
        succeed(b, 4)
        fail(b, 1)  # 20%
    assert b.state is BreakerState.CLOSED


def test_failures_older_than_the_window_are_forgotten() -> None:
    clock = FakeClock()
    b = CircuitBreaker(SETTINGS, clock)
    fail(b, 4)
    clock.t += 11  # past the 10 s window
    succeed(b, 1)
    fail(b, 1)
    assert b.window_counts() == (2, 1)
    assert b.state is BreakerState.CLOSED


def test_half_open_after_cooldown_lets_exactly_one_probe_through() -> None:
    clock = FakeClock()
    b = CircuitBreaker(SETTINGS, clock)
    fail(b, 5)
    assert b.state is BreakerState.OPEN
    assert b.retry_in() == 3
    clock.t += 2.9
    assert not b.allow()
    clock.t += 0.2
    assert b.state is BreakerState.HALF_OPEN
    assert b.would_allow()
    assert b.allow()  # the probe
    assert not b.allow()  # concurrent requests are refused while it is in flight
    assert not b.would_allow()


def test_probe_success_closes_it_with_a_fresh_window() -> None:
    clock = FakeClock()
    b = CircuitBreaker(SETTINGS, clock)
    fail(b, 5)
    clock.t += 3
    assert b.allow()
    b.record_success()
    assert b.state is BreakerState.CLOSED
    assert b.window_counts() == (0, 0)
    fail(b, 4)  # the old failures do not count towards reopening
    assert b.state is BreakerState.CLOSED


def test_probe_failure_reopens_it_for_another_cooldown() -> None:
    clock = FakeClock()
    b = CircuitBreaker(SETTINGS, clock)
    fail(b, 5)
    clock.t += 3
    assert b.allow()
    b.record_failure()
    assert b.state is BreakerState.OPEN
    clock.t += 2
    assert not b.allow()
    clock.t += 1
    assert b.allow()
    assert b.opened_count == 2


def test_a_probe_without_verdict_frees_the_slot() -> None:
    clock = FakeClock()
    b = CircuitBreaker(SETTINGS, clock)
    fail(b, 5)
    clock.t += 3
    assert b.allow()
    b.release()  # e.g. the client went away
    assert b.state is BreakerState.HALF_OPEN
    assert b.allow()


def test_a_probe_that_never_reports_times_out() -> None:
    clock = FakeClock()
    b = CircuitBreaker(SETTINGS, clock)
    fail(b, 5)
    clock.t += 3
    assert b.allow()
    clock.t += 19
    assert not b.allow()
    clock.t += 1
    assert b.allow()


def test_late_results_of_requests_let_in_while_closed_do_not_close_it() -> None:
    clock = FakeClock()
    b = CircuitBreaker(SETTINGS, clock)
    fail(b, 5)
    b.record_success()  # a slow request admitted before it opened
    assert b.state is BreakerState.OPEN
    clock.t += 3
    b.record_success()  # half-open, but this was not the probe
    assert b.state is BreakerState.HALF_OPEN


def test_states_export_as_numbers_for_metrics() -> None:
    clock = FakeClock()
    board = BreakerBoard(SETTINGS, clock)
    fail(board.get("deepseek", "deepseek-v3.2"), 5)
    board.get("google", "gemini-2.5-flash")
    states = board.states()
    assert {k: int(v) for k, v in states.items()} == {
        ("deepseek", "deepseek-v3.2"): 1,
        ("google", "gemini-2.5-flash"): 0,
    }
    assert board.unavailable() == {("deepseek", "deepseek-v3.2"): 3.0}
    clock.t += 3
    assert int(board.states()[("deepseek", "deepseek-v3.2")]) == 2


def test_live_settings_change_applies_to_existing_breakers() -> None:
    clock = FakeClock()
    board = BreakerBoard(SETTINGS, clock)
    b = board.get("p", "m")
    board.update_settings(SETTINGS.model_copy(update={"min_requests": 2}))
    fail(b, 2)
    assert b.state is BreakerState.OPEN
