"""Dated FX on the deployed gateway (Ray Serve, the sim, PostgreSQL): a rate added for
today prices the next requests within the replicas' refresh interval, with a price
version that is stored; removing it brings the config's rate back. No database call per
request: the replicas load the rates every `ledger.fx_refresh_s` (a minute by default,
FX_REFRESH_S in the tests' config; gateway/finance/fx_refresh.py)."""

from __future__ import annotations

import datetime as dt
import time
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from db.analytics.fx_store import save_rates
from db.price_sync import sync_prices
from gateway.finance.fx import FxRate
from tests.fixtures.gateway import FX_REFRESH_S
from tests.gateway.replica.test_ledger_through_gateway import wait_rows

pytestmark = pytest.mark.ray

MODEL = "relay-gpt-4.1"  # the relay bills ¥1 per $1 of list price, in CNY
REFRESH_WAIT_S = 90  # the replicas reload every FX_REFRESH_S


def _priced_row(gateway: Any) -> dict[str, Any]:
    with gateway.client() as client:
        r = client.post(
            "/v1/chat/completions",
            json={"model": MODEL, "messages": [{"role": "user", "content": "Hi"}],
                  "max_tokens": 20},
        )  # fmt: skip
    assert r.status_code == 200, r.text
    request_id = r.headers["x-costgate-request-id"]
    return wait_rows(gateway, [request_id])[request_id]


def _version_fx(engine: Any, version_id: Any) -> Decimal | None:
    with engine.connect() as conn:
        return conn.execute(
            text("SELECT fx_per_usd FROM price_versions WHERE id = :id"), {"id": version_id}
        ).scalar_one_or_none()


def _wait_for_rate(gateway: Any, engine: Any, rate: Decimal) -> dict[str, Any]:
    deadline = time.monotonic() + REFRESH_WAIT_S
    row: dict[str, Any] = {}
    while time.monotonic() < deadline:  # a request every FX_REFRESH_S / 3
        row = _priced_row(gateway)
        if row["actual_cost"] and (row["actual_cost"] / row["actual_cost_usd"]).quantize(
            Decimal("0.01")
        ) == rate.quantize(Decimal("0.01")):
            return row
        time.sleep(FX_REFRESH_S / 3)
    pytest.fail(f"no request priced at {rate} within {REFRESH_WAIT_S} s: last {row}")


def test_a_rate_added_for_today_prices_new_requests_and_old_versions_stay(gateway, sim):
    engine = create_engine(gateway.database_url)
    today = dt.datetime.now(dt.UTC).date()
    try:
        before = _priced_row(gateway)
        assert _version_fx(engine, before["price_version_id"]) == Decimal("7.3")
        save_rates(engine, [FxRate("CNY", today, Decimal("7.0"))], "test")
        sync_prices(engine, gateway.cfg)
        row = _wait_for_rate(gateway, engine, Decimal("7.0"))
        assert row["billing_currency"] == "CNY"
        # the same bill in CNY, converted at 7.0
        expected = (row["actual_cost"] / Decimal("7.0")).quantize(Decimal("1e-10"), ROUND_HALF_EVEN)
        assert row["actual_cost_usd"] == expected
        assert row["price_version_id"] != before["price_version_id"]
        assert _version_fx(engine, row["price_version_id"]) == Decimal("7.0")  # stored
        assert _version_fx(engine, before["price_version_id"]) == Decimal("7.3")  # kept
    finally:
        with engine.begin() as conn:
            conn.execute(text("DELETE FROM fx_rates WHERE source = 'test'"))
        deleted_at = time.monotonic()
        # later tests price the relay at the config's 7.3 again: on the replica that
        # answered, and on every other one once each has reloaded (each does within
        # FX_REFRESH_S; one replica at 7.3 says nothing of the others)
        _wait_for_rate(gateway, engine, Decimal("7.3"))
        time.sleep(max(0.0, deleted_at + 2 * FX_REFRESH_S - time.monotonic()))
        engine.dispose()
