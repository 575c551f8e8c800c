"""What budget alerts read and write: each budget's figures for its current period, and
the once-only record of a threshold's webhook (`budget_alerts`).

Once only, with several notifiers: `ensure_alert_row` inserts the (budget, period,
threshold) row if it is new (`INSERT ... ON CONFLICT DO NOTHING`, committed at once);
`claim_alert` locks it unless it was sent already or another notifier holds it
(`FOR UPDATE SKIP LOCKED`). The caller sends while
it holds that lock, inside the same transaction, then `mark_sent` (or `count_attempt`)
commits: a second notifier skips the row while the first one sends, and finds it sent
afterwards. A notifier that dies between the receiver's answer and its commit leaves the
row unsent, and the next one sends again: the payload's idempotency key lets a receiver
drop that rare duplicate.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from collections.abc import Callable
from decimal import Decimal

from sqlalchemy import Connection, Engine, and_, func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.sql.elements import ColumnElement

from db.budgets import load_budgets, spent_in_period
from db.models import BudgetAlert, BudgetLease
from gateway.domain.budgets import Budget, BudgetScope


@dataclasses.dataclass(frozen=True, slots=True)
class BudgetFigures:
    """A budget in its current period: the limit, what the ledger says was spent, and
    what replicas hold reserved (every live lease's slice)."""

    budget: Budget
    period_start: dt.datetime
    period_end: dt.datetime
    spent_usd: Decimal
    reserved_usd: Decimal

    @property
    def spent_pct(self) -> Decimal | None:
        if self.budget.limit_usd <= 0:
            return None
        return self.spent_usd * 100 / self.budget.limit_usd


class SpentCache:
    """What a scope spent in the closed part of its period, kept between rounds.

    A month's budget sums up to a month of ledger rows; the watch asks every 15 s. The
    part of the period that ended `settle_s` ago (whole hours) is summed once and kept
    for `refresh_s`; only the recent part is summed every round (the `started_at` index
    keeps that small). Rows that land late with an old `started_at` (a spool replayed
    after an outage) count once the closed part is summed again: within `refresh_s`.
    """

    def __init__(
        self,
        settle_s: float = 600.0,
        refresh_s: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settle = dt.timedelta(seconds=settle_s)
        self._refresh_s = refresh_s
        self._clock = clock
        self._closed: dict[tuple[str, str, dt.datetime], tuple[dt.datetime, Decimal, float]] = {}
        self._used: set[tuple[str, str, dt.datetime]] = set()

    def spent(
        self,
        conn: Connection,
        budget: Budget,
        start: dt.datetime,
        end: dt.datetime,
        now: dt.datetime,
    ) -> Decimal:
        if budget.scope is BudgetScope.EACH_USER:
            # its top spender's whole period, from the daily end-user rollup: a maximum
            # cannot be split into a kept part and a recent one
            return spent_in_period(conn, budget.scope, budget.scope_value, start, end)
        cut = (now - self._settle).replace(minute=0, second=0, microsecond=0)
        cut = max(start, min(cut, end))
        key = (budget.scope.value, budget.scope_value, start)
        self._used.add(key)
        held = self._closed.get(key)
        if held is None or held[0] != cut or self._clock() - held[2] >= self._refresh_s:
            closed = (
                spent_in_period(conn, budget.scope, budget.scope_value, start, cut)
                if cut > start
                else Decimal(0)
            )
            self._closed[key] = (cut, closed, self._clock())
        else:
            closed = held[1]
        return closed + spent_in_period(conn, budget.scope, budget.scope_value, cut, end)

    def forget_unused(self) -> None:
        """Drop what this round did not ask for (past periods, removed budgets)."""
        for key in set(self._closed) - self._used:
            del self._closed[key]
        self._used = set()


def budget_figures(
    engine: Engine, now: dt.datetime, cache: SpentCache | None = None
) -> list[BudgetFigures]:
    """Every budget's figures at `now`: a ledger sum per budget (through `cache`, only
    the recent part of it), one lease query."""
    budgets = load_budgets(engine)
    out: list[BudgetFigures] = []
    with engine.connect() as conn:
        held = {
            (row[0], row[1]): Decimal(row[2])
            for row in conn.execute(
                select(
                    BudgetLease.budget_id, BudgetLease.period_start, func.sum(BudgetLease.held_usd)
                )
                # an each-user budget's holds are its end users' own: none is the budget's
                .where(BudgetLease.expires_at > func.now(), BudgetLease.subject == "")
                .group_by(BudgetLease.budget_id, BudgetLease.period_start)
            )
        }
        for budget in budgets:
            start, end = budget.window(now)
            if cache is None:
                spent = spent_in_period(conn, budget.scope, budget.scope_value, start, end)
            else:
                spent = cache.spent(conn, budget, start, end, now)
            reserved = held.get((budget.id, start), Decimal(0))
            out.append(BudgetFigures(budget, start, end, spent, reserved))
    if cache is not None:
        cache.forget_unused()
    return out


def _key(budget_id: int, period_start: dt.datetime, threshold: int) -> ColumnElement[bool]:
    return and_(
        BudgetAlert.budget_id == budget_id,
        BudgetAlert.period_start == period_start,
        BudgetAlert.threshold == threshold,
    )


def ensure_alert_row(
    engine: Engine, budget_id: int, period_start: dt.datetime, threshold: int
) -> None:
    """The threshold's row, created unsent if new, in a transaction of its own: committed
    at once, so that another notifier's insert never waits on a send in progress."""
    with engine.begin() as conn:
        conn.execute(
            pg_insert(BudgetAlert)
            .values(budget_id=budget_id, period_start=period_start, threshold=threshold)
            .on_conflict_do_nothing(index_elements=["budget_id", "period_start", "threshold"])
        )


def claim_alert(
    conn: Connection, budget_id: int, period_start: dt.datetime, threshold: int
) -> int | None:
    """Lock the threshold's row for sending (`ensure_alert_row` first): its attempts so
    far, or None when it was sent already or another notifier is sending it now."""
    row = conn.execute(
        select(BudgetAlert.attempts)
        .where(_key(budget_id, period_start, threshold), BudgetAlert.sent_at.is_(None))
        .with_for_update(skip_locked=True)
    ).one_or_none()
    return None if row is None else int(row[0])


def mark_sent(
    conn: Connection, budget_id: int, period_start: dt.datetime, threshold: int, attempts: int
) -> None:
    conn.execute(
        update(BudgetAlert)
        .where(_key(budget_id, period_start, threshold))
        .values(sent_at=func.now(), attempts=BudgetAlert.attempts + attempts)
    )


def count_attempts(
    conn: Connection, budget_id: int, period_start: dt.datetime, threshold: int, attempts: int
) -> None:
    """Failed attempts, kept on the row (still unsent: a later round retries)."""
    conn.execute(
        update(BudgetAlert)
        .where(_key(budget_id, period_start, threshold))
        .values(attempts=BudgetAlert.attempts + attempts)
    )


def sent_keys(engine: Engine, period_starts: set[dt.datetime]) -> set[tuple[int, dt.datetime, int]]:
    """(budget id, period start, threshold) of the alerts already sent for these periods:
    one query per round, so a notifier does not claim what is long done."""
    if not period_starts:
        return set()
    with engine.connect() as conn:
        rows = conn.execute(
            select(BudgetAlert.budget_id, BudgetAlert.period_start, BudgetAlert.threshold).where(
                BudgetAlert.period_start.in_(sorted(period_starts)),
                BudgetAlert.sent_at.is_not(None),
            )
        ).all()
    return {(r[0], r[1], r[2]) for r in rows}


def sent_alerts(engine: Engine) -> list[tuple[int, dt.datetime, int, dt.datetime | None, int]]:
    """(budget id, period start, threshold, sent at, attempts) of every alert row."""
    with engine.connect() as conn:
        rows = conn.execute(
            select(
                BudgetAlert.budget_id,
                BudgetAlert.period_start,
                BudgetAlert.threshold,
                BudgetAlert.sent_at,
                BudgetAlert.attempts,
            ).order_by(BudgetAlert.budget_id, BudgetAlert.period_start, BudgetAlert.threshold)
        ).all()
    return [(r[0], r[1], r[2], r[3], r[4]) for r in rows]
