"""Budget threshold webhooks against real PostgreSQL and a real HTTP receiver on
127.0.0.1: once per threshold per period, even with two notifiers racing; a failing
receiver is retried; the webhook URL never reaches a log."""

from __future__ import annotations

import datetime as dt
import logging
import threading
import uuid
from collections.abc import Iterator
from decimal import Decimal

import pytest
from sqlalchemy import Engine, insert

from db.budget_alerts import budget_figures, sent_alerts
from db.budgets import set_budget
from db.models import UsageRow
from gateway.alerts.notifier import BudgetNotifier
from gateway.alerts.webhook import WebhookSender
from gateway.domain.budgets import BudgetPeriod, BudgetScope
from tests.fixtures.ports import PortBlock
from tests.fixtures.webhook_receiver import WebhookReceiver, webhook_receiver

pytestmark = pytest.mark.usefixtures("clean_ledger")

RECEIVER_OFFSET = 70
NOW = dt.datetime(2026, 12, 1, 15, 0, tzinfo=dt.UTC)
TOMORROW = NOW + dt.timedelta(days=1)


@pytest.fixture
def receiver(port_block: PortBlock) -> Iterator[WebhookReceiver]:
    with webhook_receiver(port_block, RECEIVER_OFFSET) as r:
        yield r


def spend(engine: Engine, app: str, usd: str, at: dt.datetime = NOW) -> None:
    row = {
        "request_id": uuid.uuid4(),
        "started_at": at,
        "ended_at": at,
        "app": app,
        "requested_model": "m",
        "stream": False,
        "status": "ok",
        "http_status": 200,
        "usage_source": "provider",
        "latency_ms": 1,
        "attempts": 1,
        "actual_cost_usd": Decimal(usd),
    }
    with engine.begin() as conn:
        conn.execute(insert(UsageRow).values(**row))


def notifier(engine: Engine, receiver: WebhookReceiver, **kwargs: object) -> BudgetNotifier:
    sender = WebhookSender(receiver.url, attempts=4, backoff_s=0.01, timeout_s=5)
    return BudgetNotifier(engine, sender, **kwargs)  # type: ignore[arg-type]


def thresholds_sent(receiver: WebhookReceiver) -> list[tuple[int, int]]:
    return sorted(
        (b["costgate"]["budget_id"], b["costgate"]["threshold_pct"]) for b in receiver.bodies
    )


def test_a_budget_past_a_threshold_sends_one_webhook_per_threshold_per_period(
    ledger_engine: Engine, receiver: WebhookReceiver
) -> None:
    budget = set_budget(
        ledger_engine, BudgetScope.APP, "shop", BudgetPeriod.DAY, Decimal("0.02"), actor="t"
    )
    spend(ledger_engine, "shop", "0.017")  # 85%: past 50 and 80, not 100
    spend(ledger_engine, "other", "5")  # another app's spend counts nothing here
    n = notifier(ledger_engine, receiver)
    for _ in range(3):  # rounds after the first find both sent
        n.notify(budget_figures(ledger_engine, NOW))
    assert thresholds_sent(receiver) == [(budget.id, 50), (budget.id, 80)]

    spend(ledger_engine, "shop", "0.004")  # 105%
    n.notify(budget_figures(ledger_engine, NOW))
    n.notify(budget_figures(ledger_engine, NOW))
    assert thresholds_sent(receiver) == [(budget.id, 50), (budget.id, 80), (budget.id, 100)]

    body = receiver.bodies[-1]
    assert "app 'shop'" in body["text"] and "100% alert" in body["text"]
    assert "$0.02" in body["text"] and "daily" in body["text"]
    fields = body["costgate"]
    assert fields["spent_usd"] == "0.021" and fields["limit_usd"] == "0.02"
    assert fields["period_start"] == "2026-12-01T00:00:00+00:00"

    # the next day is a new period: its thresholds are sent again once reached
    spend(ledger_engine, "shop", "0.011", at=TOMORROW)
    n.notify(budget_figures(ledger_engine, TOMORROW))
    n.notify(budget_figures(ledger_engine, TOMORROW))
    assert len(receiver.bodies) == 4
    assert receiver.bodies[-1]["costgate"]["period_start"] == "2026-12-02T00:00:00+00:00"
    assert receiver.bodies[-1]["costgate"]["threshold_pct"] == 50
    rows = sent_alerts(ledger_engine)
    assert len(rows) == 4 and all(r[3] is not None and r[4] == 1 for r in rows)


def test_two_notifiers_racing_send_each_threshold_once(
    ledger_engine: Engine, receiver: WebhookReceiver
) -> None:
    budgets = [
        set_budget(ledger_engine, BudgetScope.APP, app, BudgetPeriod.DAY, Decimal(1), actor="t")
        for app in ("a", "b", "c")
    ]
    for app in ("a", "b", "c"):
        spend(ledger_engine, app, "1.5")  # every threshold of every budget is due
    receiver.delay_s = 0.2  # each send holds its claim a while: the other one must skip it
    figures = budget_figures(ledger_engine, NOW)
    notifiers = [notifier(ledger_engine, receiver), notifier(ledger_engine, receiver)]
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def run(n: BudgetNotifier) -> None:
        try:
            start.wait()
            for _ in range(3):
                n.notify(figures)
        except BaseException as err:  # noqa: BLE001 - surfaced by the assert below
            errors.append(err)

    threads = [threading.Thread(target=run, args=(n,)) for n in notifiers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    expected = sorted((b.id, t) for b in budgets for t in (50, 80, 100))
    assert thresholds_sent(receiver) == expected
    assert receiver.posts == len(expected)
    # both did part of the work: the race was real
    assert all(n.counts["sent"] > 0 for n in notifiers)
    assert sum(n.counts["sent"] for n in notifiers) == len(expected)


def test_a_failing_receiver_is_retried_and_the_url_is_never_logged(
    ledger_engine: Engine, receiver: WebhookReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    budget = set_budget(
        ledger_engine,
        BudgetScope.APP,
        "shop",
        BudgetPeriod.DAY,
        Decimal(1),
        actor="t",
        alert_at=(100,),
    )
    spend(ledger_engine, "shop", "1")
    clock = [0.0]
    n = notifier(ledger_engine, receiver, retry_backoff_s=30, clock=lambda: clock[0])

    receiver.fail_next = 2  # the sender's own retries get through on the third post
    n.notify(budget_figures(ledger_engine, NOW))
    assert receiver.posts == 3 and thresholds_sent(receiver) == [(budget.id, 100)]
    assert sent_alerts(ledger_engine)[0][4] == 3

    # a receiver down for a whole round: counted, retried in a later round after backoff
    budget2 = set_budget(
        ledger_engine, BudgetScope.APP, "b2", BudgetPeriod.DAY, Decimal(1), actor="t"
    )
    spend(ledger_engine, "b2", "0.5")
    receiver.fail_next = 4
    with caplog.at_level(logging.INFO):
        n.notify(budget_figures(ledger_engine, NOW))
    assert n.counts["failed"] == 1 and receiver.posts == 7
    (row,) = [r for r in sent_alerts(ledger_engine) if r[0] == budget2.id]
    assert row[3] is None and row[4] == 4
    assert "HTTP 503" in caplog.text
    assert "<webhook url>" in caplog.text  # httpx's own request log, with the URL hidden
    assert receiver.url not in caplog.text and "/hook" not in caplog.text

    n.notify(budget_figures(ledger_engine, NOW))  # still backing off: nothing posted
    assert receiver.posts == 7
    clock[0] = 31.0
    n.notify(budget_figures(ledger_engine, NOW))
    assert thresholds_sent(receiver) == [(budget.id, 100), (budget2.id, 50)]
    (row,) = [r for r in sent_alerts(ledger_engine) if r[0] == budget2.id]
    assert row[3] is not None and row[4] == 5


@pytest.mark.parametrize("written", [
    # an upper-case host (httpx logs it lower-cased) and an explicit port (kept)
    lambda url: url.replace("127.0.0.1", "LocalHost").replace("/hook", "/hook?token=s3cret"),
    lambda url: url.replace("http://", "HTTP://").replace("/hook", "/hook?token=s3cret"),
])
def test_the_webhook_url_is_hidden_in_httpx_logs_however_it_is_written(
    receiver: WebhookReceiver, caplog: pytest.LogCaptureFixture, written
) -> None:
    url = written(receiver.url)
    sender = WebhookSender(url, attempts=1, timeout_s=5)
    try:
        with caplog.at_level(logging.INFO, logger="httpx"):
            sender.send({"text": "hello"})
    finally:
        sender.close()
    assert receiver.posts == 1  # the request went out and httpx logged it
    assert "HTTP Request" in caplog.text and "<webhook url>" in caplog.text
    assert "s3cret" not in caplog.text and "/hook" not in caplog.text


def test_a_default_port_written_out_is_hidden_in_the_url_httpx_logs() -> None:
    import httpx

    from gateway.alerts.webhook import _HIDE

    WebhookSender("https://HOOKS.example.com:443/services/T1/B1/t0ken").close()
    logged = httpx.URL("https://HOOKS.example.com:443/services/T1/B1/t0ken")  # as httpx logs
    assert str(logged) == "https://hooks.example.com/services/T1/B1/t0ken"
    record = logging.LogRecord("httpx", logging.INFO, __file__, 1, 'HTTP Request: %s %s "%s"',
                               ("POST", logged, "HTTP/1.1 200 OK"), None)  # fmt: skip
    assert _HIDE.filter(record) and "t0ken" not in record.getMessage()
