"""Dated FX: the rate in force on a day, and the versions it makes (old ones untouched)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from gateway.domain.pricing import TokenUsage
from gateway.finance.fx import FxRate, FxSchedule, catalog_on, dated_versions, next_change_after

D = Decimal
NOV1, NOV15 = dt.date(2026, 11, 1), dt.date(2026, 11, 15)
SCHEDULE = FxSchedule.of([FxRate("CNY", NOV1, D("7.2")), FxRate("cny", NOV15, D("7.0"))])


def test_the_rate_in_force_is_the_latest_on_or_before_the_day():
    assert SCHEDULE.rate_on("CNY", dt.date(2026, 10, 31)) is None
    assert SCHEDULE.rate_on("CNY", NOV1).per_usd == D("7.2")
    assert SCHEDULE.rate_on("CNY", dt.date(2026, 11, 14)).per_usd == D("7.2")
    assert SCHEDULE.rate_on("CNY", NOV15).per_usd == D("7.0")
    assert SCHEDULE.rate_on("EUR", NOV15) is None
    assert next_change_after(SCHEDULE, NOV1) == NOV15


def test_a_corrected_rate_for_the_same_day_replaces_the_first():
    s = FxSchedule.of([FxRate("CNY", NOV1, D("7.2")), FxRate("CNY", NOV1, D("7.25"))])
    assert [r.per_usd for r in s.rates()] == [D("7.25")]


def test_bad_rates_are_refused():
    with pytest.raises(ValueError):
        FxRate("CNY", NOV1, D(0))
    with pytest.raises(ValueError):
        FxRate("yuan", NOV1, D(7))


def test_requests_are_priced_at_the_rate_of_their_day(catalog):
    usage = TokenUsage(prompt_tokens=0, completion_tokens=1_000_000)
    before = catalog_on(catalog, SCHEDULE, dt.date(2026, 10, 31))
    assert before is catalog  # no dated rate yet: the config's 7.3
    on_15th = catalog_on(catalog, SCHEDULE, NOV15)
    priced = on_15th.price("relay-gpt-4.1", usage)
    assert priced.actual_cost == D(8)  # ¥8 for $8 of list price
    assert priced.actual_cost_usd == D("1.1428571429")  # at 7.0
    v_old, v_new = catalog.versions["relay-gpt-4.1"], on_15th.versions["relay-gpt-4.1"]
    assert v_new.id != v_old.id and v_old.fx_per_usd == D("7.3")  # the stored one keeps 7.3
    assert v_new.effective_from == NOV15
    # USD providers are untouched
    assert on_15th.versions["gpt-4.1"] is catalog.versions["gpt-4.1"]


def test_dated_versions_cover_every_rate_of_every_currency_in_use(catalog):
    made = dated_versions(catalog, SCHEDULE)
    relay_models = [n for n, v in catalog.versions.items() if v.billing_currency == "CNY"]
    assert len(made) == 2 * len(relay_models)
    assert {v.fx_per_usd for v in made} == {D("7.2"), D("7.0")}
