"""Budget threshold webhooks: once per (budget, period, threshold), safe with several
notifiers running, retried until delivered.

Each round takes every budget's figures, finds the thresholds its spend has reached this
period (`due_thresholds`, pure) and, for each one not yet sent, claims its row in
`budget_alerts` and sends while holding the claim (see db/budget_alerts.py for why that
is once only). A failed delivery (after the sender's own quick retries) is counted on the
row and retried in later rounds, backing off per alert up to `max_backoff_s`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import time
from collections.abc import Callable, Sequence

from sqlalchemy import Engine

from db.budget_alerts import (
    BudgetFigures,
    claim_alert,
    count_attempts,
    ensure_alert_row,
    mark_sent,
    sent_keys,
)
from gateway.alerts.webhook import Delivery, WebhookSender, alert_body

log = logging.getLogger(__name__)

AlertKey = tuple[int, dt.datetime, int]


def due_thresholds(figures: BudgetFigures) -> list[int]:
    """The budget's alert thresholds its spend has reached, ascending. A $0 budget has
    reached all of them once anything at all was spent."""
    limit, spent = figures.budget.limit_usd, figures.spent_usd
    if limit <= 0:
        return sorted(figures.budget.alert_at) if spent > 0 else []
    return sorted(t for t in figures.budget.alert_at if spent * 100 >= limit * t)


@dataclasses.dataclass(frozen=True, slots=True)
class Outcome:
    key: AlertKey
    delivery: Delivery


class BudgetNotifier:
    def __init__(
        self,
        engine: Engine,
        sender: WebhookSender,
        *,
        retry_backoff_s: float = 15.0,
        max_backoff_s: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._engine = engine
        self._sender = sender
        self._retry_backoff_s = retry_backoff_s
        self._max_backoff_s = max_backoff_s
        self._clock = clock
        self._not_before: dict[AlertKey, float] = {}  # failed alerts, backing off
        self._failures: dict[AlertKey, int] = {}
        self.counts = {"sent": 0, "failed": 0}

    def notify(self, figures: Sequence[BudgetFigures]) -> list[Outcome]:
        """One round: send every due, unsent threshold; what was attempted."""
        outcomes: list[Outcome] = []
        due = [(f, t) for f in figures for t in due_thresholds(f)]
        done = sent_keys(self._engine, {f.period_start for f, _ in due}) if due else set()
        for f, threshold in due:
            key: AlertKey = (f.budget.id, f.period_start, threshold)
            if key in done or self._clock() < self._not_before.get(key, float("-inf")):
                continue
            outcome = self._send_once(f, threshold, key)
            if outcome is not None:
                outcomes.append(outcome)
        return outcomes

    def _send_once(self, f: BudgetFigures, threshold: int, key: AlertKey) -> Outcome | None:
        ensure_alert_row(self._engine, *key)
        with self._engine.begin() as conn:
            if claim_alert(conn, *key) is None:
                return None  # sent already, or another notifier is sending it
            delivery = self._sender.send(alert_body(f, threshold))
            if delivery.ok:
                mark_sent(conn, *key, delivery.attempts)
            else:
                count_attempts(conn, *key, delivery.attempts)
        if delivery.ok:
            self.counts["sent"] += 1
            self._not_before.pop(key, None)
            self._failures.pop(key, None)
        else:
            self.counts["failed"] += 1
            n = self._failures[key] = self._failures.get(key, 0) + 1
            wait = min(self._max_backoff_s, self._retry_backoff_s * 2 ** (n - 1))
            self._not_before[key] = self._clock() + wait
            log.warning(
                "budget %d: the %d%% webhook failed (%s); retrying in %.0f s",
                f.budget.id,
                threshold,
                delivery.last_error,
                wait,
            )
        return Outcome(key, delivery)
