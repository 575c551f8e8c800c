"""The shipped budget alert rules fire in a real Prometheus (Debian's) that scrapes a real
budget watch over real PostgreSQL: one budget past 80%, one spent, one burning fast enough
to run out before its period ends."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import threading
import time
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from sqlalchemy import Engine, insert

from db.budgets import set_budget
from db.models import UsageRow
from gateway.alerts.watch import BudgetWatch, serve
from gateway.domain.budgets import BudgetPeriod, BudgetScope
from tests.fixtures.ports import PortBlock, port_is_free
from tests.fixtures.prometheus_server import PrometheusServer, prometheus_scraping

pytestmark = pytest.mark.usefixtures("clean_ledger")

RULES = (
    Path(__file__).resolve().parents[3] / "deploy" / "prometheus" / "rules" / "costgate.rules.yml"
)
WATCH_OFFSET = 72
MONTH = BudgetPeriod.MONTH  # a month: the test never straddles a period's end


def spend(engine: Engine, app: str, usd: str) -> None:
    now = dt.datetime.now(dt.UTC)
    with engine.begin() as conn:
        conn.execute(
            insert(UsageRow).values(
                request_id=uuid.uuid4(),
                started_at=now,
                ended_at=now,
                app=app,
                requested_model="m",
                stream=False,
                status="ok",
                http_status=200,
                usage_source="provider",
                latency_ms=1,
                attempts=1,
                actual_cost_usd=Decimal(usd),
            )
        )


@contextlib.contextmanager
def running_watch(watch: BudgetWatch, port: int) -> Iterator[None]:
    """The watch's rounds and its /metrics on 127.0.0.1:port, in a loop of their own."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    runner = asyncio.run_coroutine_threadsafe(serve(watch, "127.0.0.1", port), loop).result(10)
    rounds = asyncio.run_coroutine_threadsafe(watch.run_forever(), loop)
    try:
        yield
    finally:
        rounds.cancel()
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()


def alerts_by_budget(prom: PrometheusServer) -> dict[tuple[str, str], str]:
    return {
        (a["labels"]["alertname"], a["labels"].get("scope_value", "")): a["state"]
        for a in prom.alerts()
    }


def test_the_budget_rules_fire_in_a_real_prometheus(
    ledger_engine: Engine, port_block: PortBlock, tmp_path: Path
) -> None:
    for app, limit in (("at85", "1"), ("spent", "1"), ("burning", "1000"), ("calm", "1")):
        set_budget(ledger_engine, BudgetScope.APP, app, MONTH, Decimal(limit), actor="t")
    spend(ledger_engine, "at85", "0.85")
    spend(ledger_engine, "spent", "1.2")
    spend(ledger_engine, "calm", "0.1")
    spend(ledger_engine, "burning", "0.5")
    port = port_block.port(WATCH_OFFSET)
    assert port_is_free(port)
    watch = BudgetWatch(ledger_engine, interval_s=1.0)
    with (
        running_watch(watch, port),
        prometheus_scraping(
            f"127.0.0.1:{port}",
            tmp_path,
            interval_s=1,
            rule_files=[RULES],
            evaluation_interval_s=1,
            job_name="costgate-budgets",
        ) as prom,
    ):
        wanted = {
            ("CostgateBudgetAt80Percent", "at85"): "firing",
            ("CostgateBudgetExhausted", "spent"): "firing",
            # held 15 minutes before firing: pending says its expression holds
            ("CostgateBudgetBurnRate", "burning"): "pending",
        }
        seen: dict[tuple[str, str], str] = {}
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            spend(ledger_engine, "burning", "0.5")  # $0.50 a second: $1000 gone in a month
            seen = alerts_by_budget(prom)
            if all(seen.get(k) == v for k, v in wanted.items()):
                break
            time.sleep(1)
        assert {k: seen.get(k) for k in wanted} == wanted
        # and nothing about the budgets that are not there yet
        assert not any(scope == "calm" for (_, scope) in seen)
        assert ("CostgateBudgetAt80Percent", "spent") not in seen  # it is past 100, not 80
        assert ("CostgateBudgetExhausted", "at85") not in seen
        assert ("CostgateBudgetBurnRate", "at85") not in seen  # not spending any more
        assert prom.scalar('costgate_budget_limit_usd{scope_value="burning"}') == 1000
