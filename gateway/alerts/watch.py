"""The budget watch: one loop that reads every budget's figures every `interval_s`,
serves them as Prometheus gauges on its own `/metrics`, and sends threshold webhooks.

Why a process of its own (`costgate alerts run`), not the replicas nor the dashboard:
the figures are a ledger sum per budget, and N replicas each running it would multiply
that load by N for the same numbers (the replicas' hot path stays free of it too); the
dashboard runs only while someone deploys it, and Streamlit has no place for a
background loop. One small process reads the database once per round, whatever the
number of replicas, keeps working while Ray is down or redeploying, and a scrape only
renders what the last round read (no query per scrape). Webhooks are once-only even if
two watches run (db/budget_alerts.py); for the gauges run one per deployment, or
aggregate with `max by (budget_id, ...)`.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST
from sqlalchemy import Engine

from db.budget_alerts import BudgetFigures, SpentCache, budget_figures
from gateway.alerts.budget_metrics import render_budgets
from gateway.alerts.notifier import BudgetNotifier

log = logging.getLogger(__name__)


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class BudgetWatch:
    def __init__(
        self,
        engine: Engine,
        notifier: BudgetNotifier | None = None,
        *,
        interval_s: float = 15.0,
        now: Callable[[], dt.datetime] = _utc_now,
    ) -> None:
        self._engine = engine
        self._notifier = notifier
        self.interval_s = interval_s
        self._now = now
        self._spent = SpentCache()  # a month's ledger rows are not summed every round
        self.figures: list[BudgetFigures] = []
        self.last_success: float | None = None

    def run_round(self) -> None:
        """Read the figures, then send what is due. Blocking: run it in a thread."""
        figures = budget_figures(self._engine, self._now(), self._spent)
        self.figures, self.last_success = figures, time.time()
        if self._notifier is not None:
            self._notifier.notify(figures)

    def render(self) -> bytes:
        counts = self._notifier.counts if self._notifier is not None else {}
        return render_budgets(self.figures, self.last_success, counts)

    async def run_forever(self) -> None:
        while True:
            try:
                await asyncio.to_thread(self.run_round)
            except Exception as err:  # the database may be away: the next round retries
                log.warning("budget watch: round failed: %s", type(err).__name__)
            await asyncio.sleep(self.interval_s)


def metrics_app(watch: BudgetWatch) -> web.Application:
    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=watch.render(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def healthz(_: web.Request) -> web.Response:
        fresh = watch.last_success is not None and (
            time.time() - watch.last_success < 4 * watch.interval_s + 30
        )
        return web.json_response({"ok": fresh}, status=200 if fresh else 503)

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", healthz)
    return app


async def serve(watch: BudgetWatch, host: str, port: int) -> web.AppRunner:
    """Start `/metrics` and `/healthz` on host:port; the caller cleans the runner up."""
    runner = web.AppRunner(metrics_app(watch), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner


async def run_watch(watch: BudgetWatch, host: str, port: int) -> None:
    """`costgate alerts run`: serve and loop until cancelled."""
    runner = await serve(watch, host, port)
    try:
        await watch.run_forever()
    finally:
        await runner.cleanup()
