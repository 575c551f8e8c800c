"""A budget slice's local bookkeeping: reserve within the hold, settle to actual, release,
and what a sync asks and applies."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from gateway.domain.budgets import Budget, BudgetPeriod, BudgetScope
from gateway.quota.budget_slice import (
    QUIET_SYNCS_BEFORE_RETURN,
    SUBJECT_QUIET_SYNCS_BEFORE_RETURN,
    BudgetSlice,
)

D = Decimal
START = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)


def _slice(held: str = "0") -> BudgetSlice:
    b = Budget(1, BudgetScope.APP, "shop", BudgetPeriod.DAY, D("0.02"), True)
    s = BudgetSlice(b, START, START + dt.timedelta(days=1))
    s.held = D(held)
    return s


def test_reservations_fit_inside_the_hold_only() -> None:
    s = _slice("0.01")
    assert s.try_reserve(D("0.004")) and s.try_reserve(D("0.004"))
    assert not s.try_reserve(D("0.004"))
    assert s.free == D("0.002")


def test_settling_spends_the_actual_cost_and_frees_the_rest() -> None:
    s = _slice("0.01")
    s.try_reserve(D("0.005"))
    s.settle(D("0.005"), D("0.001"))
    assert (s.held, s.in_use, s.unreported, s.free) == (D("0.009"), 0, D("0.001"), D("0.009"))


def test_releasing_spends_nothing() -> None:
    s = _slice("0.01")
    s.try_reserve(D("0.005"))
    s.release(D("0.005"))
    assert (s.held, s.in_use, s.unreported) == (D("0.01"), 0, 0)


def test_a_sync_reports_settled_spend_and_returns_what_is_not_needed() -> None:
    s = _slice("0.02")
    s.try_reserve(D("0.005"))
    s.settle(D("0.005"), D("0.002"))
    ask = s.begin_sync(100.0)
    # keeps max(2 x the reservation rate, 2 x largest 0.005) = 0.01 free; 0.008 goes back
    assert ask.settled_delta == D("0.002") and ask.returned_usd == D("0.008")
    assert s.held == D("0.01") and s.unreported == 0
    s.end_sync(held=D("0.01"), granted=D(0), renewed=True, remaining=D("0.008"))
    assert s.free == D("0.01") and not s.exhausted


def test_what_a_sync_brought_its_waiters_is_not_returned_before_they_reserve_it() -> None:
    s = _slice()
    s.need(D("0.004"))
    s.need(D("0.004"))
    ask = s.begin_sync(100.0)
    assert ask.want_free_usd == D("0.008")
    s.end_sync(held=D("0.008"), granted=D("0.008"), renewed=True, remaining=D("0.012"))
    # another shortage starts the next sync before the two woke up: theirs stays
    assert s.begin_sync(100.01).returned_usd == 0 and s.free == D("0.008")
    s.end_sync(held=D("0.008"), granted=D(0), renewed=True, remaining=D("0.012"))
    assert s.try_reserve(D("0.004")) and s.try_reserve(D("0.004"))


def test_what_waiters_left_unreserved_goes_back_a_sync_later() -> None:
    s = _slice()
    s.need(D("0.004"))
    s.begin_sync(100.0)
    s.end_sync(held=D("0.004"), granted=D("0.004"), renewed=True, remaining=D("0.016"))
    assert s.begin_sync(100.01).returned_usd == 0  # kept one sync for the waiter
    s.end_sync(held=D("0.004"), granted=D(0), renewed=True, remaining=D("0.016"))
    assert s.begin_sync(100.02).returned_usd == D("0.004")  # it gave up: back it goes


def test_a_failed_sync_is_undone() -> None:
    s = _slice("0.02")
    s.try_reserve(D("0.005"))
    s.settle(D("0.005"), D("0.002"))
    s.begin_sync(100.0)
    s.abort_sync()
    assert s.held == D("0.018") and s.unreported == D("0.002")


def test_no_room_anywhere_marks_the_slice_exhausted_until_a_sync_finds_some() -> None:
    s = _slice()
    s.need(D("0.005"))
    ask = s.begin_sync(100.0)
    assert ask.min_free_usd == D("0.005") and ask.want_free_usd >= D("0.005")
    s.end_sync(held=D(0), granted=D(0), renewed=True, remaining=D("0.001"))
    assert s.exhausted and not s.idle()  # it keeps syncing, to see a raised limit
    s.begin_sync(100.0)
    s.end_sync(held=D("0.01"), granted=D("0.01"), renewed=True, remaining=D("0.5"))
    assert not s.exhausted and s.free == D("0.01")


def test_a_lapsed_hold_restarts_at_what_is_in_flight() -> None:
    s = _slice("0.01")
    s.try_reserve(D("0.004"))
    s.begin_sync(100.0)
    s.settle(D("0.004"), D("0.003"))  # settles while the sync runs
    s.end_sync(held=D("0.009"), granted=D("0.005"), renewed=False, remaining=D("0.01"))
    assert s.held == D("0.006") and s.in_use == 0


def test_an_unused_slice_goes_back_whole_after_a_while() -> None:
    s = _slice("0.02")
    s.try_reserve(D("0.005"))
    s.release(D("0.005"))
    returned = D(0)
    for i in range(QUIET_SYNCS_BEFORE_RETURN + 1):
        ask = s.begin_sync(100.0 + i)
        returned += ask.returned_usd
        s.end_sync(held=s.held, granted=D(0), renewed=True, remaining=D("0.02"))
    assert returned == D("0.02") and s.idle()


def test_the_slice_follows_the_reservation_rate_not_the_number_of_rounds() -> None:
    s = _slice("1")

    def sync(at: float) -> None:
        ask = s.begin_sync(at)
        s.end_sync(held=s.held, granted=ask.want_free_usd, renewed=True, remaining=D(1))

    for second in range(1, 6):  # 0.1 a second
        for _ in range(10):
            assert s.try_reserve(D("0.01"))
            s.settle(D("0.01"), D("0.01"))
        sync(float(second))
    for i in range(5):  # then a burst of rounds within 50 ms
        sync(5.0 + i * 0.01)
    assert D("0.15") < s.free <= D("0.2")  # about 2 x 0.1 a second, kept


def test_an_end_users_slice_goes_back_whole_after_a_few_quiet_syncs() -> None:
    b = Budget(2, BudgetScope.EACH_USER, "shop", BudgetPeriod.DAY, D("0.02"), True)
    s = BudgetSlice(b, START, START + dt.timedelta(days=1), subject="alice")
    assert s.key == (2, "alice", START)
    s.held = D("0.01")
    s.try_reserve(D("0.004"))
    s.settle(D("0.004"), D("0.003"))
    syncs = 0
    while not s.idle():
        ask = s.begin_sync(100.0 + syncs)
        s.end_sync(s.held, D(0), renewed=True, remaining=D("0.01"))
        syncs += 1
        assert ask.in_use_usd == 0 and syncs <= SUBJECT_QUIET_SYNCS_BEFORE_RETURN + 1
    assert s.held == 0  # everything handed back: nothing of it is kept for this end user
    assert SUBJECT_QUIET_SYNCS_BEFORE_RETURN < QUIET_SYNCS_BEFORE_RETURN
