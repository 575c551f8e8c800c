"""The cube: built from raw records, sliced by time, rolled up by period."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from dashboard.cube import between, dsum, records_to_cube
from dashboard.spend import over_time, totals
from tests.dashboard.support.records import T0, frame, record


def test_weekly_and_monthly_rollups_keep_the_total():
    recs = [
        record(started_at=T0 + dt.timedelta(days=d), actual_cost_usd=Decimal(d + 1))
        for d in range(40)
    ]
    cube = records_to_cube(frame(recs), "day")
    for freq in ("D", "W", "MS"):
        series = over_time(cube, freq)
        assert dsum(series["actual_cost_usd"]) == sum(Decimal(d + 1) for d in range(40))
    weeks = over_time(cube, "W")["period"]
    assert all(p.weekday() == 0 for p in weeks)  # ISO weeks start on Monday
    months = over_time(cube, "MS")["period"].dt.strftime("%Y-%m").tolist()
    assert months == ["2026-11", "2026-12"]


def test_hourly_grain_buckets_by_hour():
    recs = [record(started_at=T0 + dt.timedelta(minutes=m)) for m in (0, 59, 61)]
    cube = records_to_cube(frame(recs), "hour")
    assert sorted(cube["requests"].tolist()) == [1, 2]


def test_between_selects_half_open_range():
    recs = [record(started_at=T0 + dt.timedelta(days=d)) for d in range(3)]
    cube = records_to_cube(frame(recs), "day")
    day = dt.datetime(2026, 11, 3, tzinfo=dt.UTC)
    assert totals(between(cube, day, day + dt.timedelta(days=1))).requests == 1


def test_dsum_skips_none_and_nan():
    assert dsum([None, float("nan"), Decimal("1.5")]) == Decimal("1.5")
    assert dsum([None]) is None


def test_rollup_money_sums_are_each_groups_dsum_to_the_exponent():
    """rollup sums money by group in C (sorted once, Decimal's own sum): the same
    Decimals as dsum over each group's rows in their order, None where a group has no
    known value, with None and NaN skipped."""
    import random

    import pandas as pd

    from dashboard.cube import COUNTS, MONEY, rollup

    rng = random.Random(20261201)
    choices = [None, float("nan"), Decimal("0.000"), Decimal("1.10"), Decimal("7.3")]
    rows = []
    for _ in range(3000):
        row: dict[str, object] = {"model": rng.choice(["a", "b", "c", None]), "requests": 1}
        for c in MONEY:
            row[c] = rng.choice(choices)
            if rng.random() < 0.3:  # a value of an exponent of its own
                row[c] = Decimal(rng.randint(0, 10**9)).scaleb(-rng.randint(0, 12))
        rows.append(row)
    rows.append({"model": "only-unknown", "requests": 1, **{c: None for c in MONEY}})
    cube = pd.DataFrame(rows)
    for c in MONEY:
        cube[c] = cube[c].astype(object)
    for c in COUNTS[1:]:
        cube[c] = 0
    out = rollup(cube, ["model"])
    assert len(out) == 5
    for _, got in out.iterrows():
        key = got["model"]
        mine = cube[cube["model"].isna()] if key is None else cube[cube["model"] == key]
        for c in MONEY:
            want = dsum(mine[c].tolist())
            assert (got[c] is None) == (want is None), (key, c)
            if want is not None:
                assert str(got[c]) == str(want), (key, c)  # the value and its exponent
    assert all(out[out["model"] == "only-unknown"][c].iloc[0] is None for c in MONEY)
