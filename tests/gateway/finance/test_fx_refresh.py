"""The replica's dated FX: a loaded schedule re-prices new requests at the day's rate, a
failed load keeps the last one, and nothing is swapped when nothing changed."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from gateway.domain.pricing import TokenUsage
from gateway.finance.fx import FxRate, FxSchedule
from gateway.finance.fx_refresh import FxRefresher, seconds_to_midnight, utc_today
from gateway.replica.service import GatewayService

OUT_1M = TokenUsage(prompt_tokens=0, completion_tokens=1_000_000)


async def test_a_rate_in_force_today_prices_new_requests_and_a_failed_load_keeps_it(cfg):
    service = GatewayService(cfg)
    try:
        config_catalog = service.catalog
        loads: list[FxSchedule | Exception] = [
            FxSchedule.of([FxRate("CNY", utc_today(), Decimal("7.0"))]),
            RuntimeError("PostgreSQL away"),
        ]

        def load() -> FxSchedule:
            nxt = loads.pop(0)
            if isinstance(nxt, Exception):
                raise nxt
            return nxt

        fx = FxRefresher(service, load)
        await fx.refresh()
        priced = service.catalog.price("relay-gpt-4.1", OUT_1M)
        assert priced.actual_cost_usd == Decimal("1.1428571429")  # ¥8 at 7.0, not 7.3
        assert service.cache.catalog is service.catalog  # cache hits are priced alike
        assert config_catalog.price("relay-gpt-4.1", OUT_1M).actual_cost_usd == Decimal(
            "1.0958904110"
        )
        await fx.refresh()  # the load fails: the rate stays in force
        assert service.catalog.versions["relay-gpt-4.1"].fx_per_usd == Decimal("7.0")
    finally:
        await service.aclose()


async def test_a_rate_from_tomorrow_changes_nothing_today(cfg):
    service = GatewayService(cfg)
    try:
        before = service.catalog
        tomorrow = utc_today() + dt.timedelta(days=1)
        fx = FxRefresher(service, lambda: FxSchedule.of([FxRate("CNY", tomorrow, Decimal(7))]))
        await fx.refresh()
        assert service.catalog is before
        assert fx.apply(tomorrow) is True  # at midnight it comes into force
    finally:
        await service.aclose()


def test_the_loop_wakes_at_midnight():
    now = dt.datetime(2026, 11, 2, 23, 59, 30, tzinfo=dt.UTC)
    assert seconds_to_midnight(now) == 30.0
