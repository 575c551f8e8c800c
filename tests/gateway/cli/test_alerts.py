"""`costgate alerts run` as a real process over real PostgreSQL: its /metrics shows every
budget's gauges, a budget past a threshold reaches a real webhook receiver once, and the
webhook URL (a secret) never appears in its output."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine

from db.budgets import set_budget
from gateway.domain.budgets import BudgetPeriod, BudgetScope
from tests.fixtures.ports import PortBlock, port_is_free
from tests.fixtures.webhook_receiver import WebhookReceiver, webhook_receiver
from tests.gateway.alerts.test_rules_fire import spend

pytestmark = pytest.mark.usefixtures("clean_ledger")

WATCH_OFFSET, RECEIVER_OFFSET = 74, 75


@pytest.fixture
def receiver(port_block: PortBlock) -> Iterator[WebhookReceiver]:
    with webhook_receiver(port_block, RECEIVER_OFFSET) as r:
        yield r


@contextlib.contextmanager
def alerts_process(database_url: str, port: int, hook: str, log: Path) -> Iterator[str]:
    env = dict(os.environ, DATABASE_URL=database_url, COSTGATE_ALERT_WEBHOOK_URL=hook)
    command = [sys.executable, "-m", "gateway.cli", "alerts", "run", "--port", str(port)]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*command, "--interval", "0.5"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(15)


def test_the_budget_watch_exports_gauges_and_sends_a_threshold_once(
    database_url: str,
    ledger_engine: Engine,
    receiver: WebhookReceiver,
    port_block: PortBlock,
    tmp_path: Path,
) -> None:
    budget = set_budget(
        ledger_engine, BudgetScope.APP, "shop", BudgetPeriod.MONTH, Decimal(2), actor="t"
    )
    spend(ledger_engine, "shop", "1.7")  # 85%
    port = port_block.port(WATCH_OFFSET)
    assert port_is_free(port)
    log = tmp_path / "alerts.log"
    with alerts_process(database_url, port, receiver.url, log) as url:
        deadline = time.monotonic() + 60
        text = ""
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                text = httpx.get(f"{url}/metrics", timeout=2).text
                if "costgate_budget_spent_usd{" in text and len(receiver.bodies) >= 2:
                    break
            time.sleep(0.3)
        time.sleep(2)  # a few more rounds: nothing more may be sent
        assert httpx.get(f"{url}/healthz", timeout=2).status_code == 200
    labels = f'budget_id="{budget.id}",period="month",scope="app",scope_value="shop"'
    assert f"costgate_budget_spent_usd{{{labels}}} 1.7" in text
    assert f"costgate_budget_limit_usd{{{labels}}} 2.0" in text
    assert sorted(b["costgate"]["threshold_pct"] for b in receiver.bodies) == [50, 80]
    assert receiver.posts == 2
    output = log.read_text()
    assert "budget watch: http://127.0.0.1:" in output
    assert receiver.url not in output and "/hook" not in output
