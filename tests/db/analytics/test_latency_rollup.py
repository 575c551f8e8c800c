"""The latency rollups hold one histogram per hour × group × metric (bins 2.02% wide),
and the percentiles the dashboard reads from them are within one bin of the exact ones."""

from __future__ import annotations

import asyncio
import datetime as dt
import random
import uuid
from typing import Any

import pandas as pd
from sqlalchemy import Engine, text

from dashboard.latency import RELATIVE_ERROR, percentile_from_bins
from dashboard.queries import _ROLLUP_HISTOGRAM_SQL
from db.analytics import rollup_sql
from gateway.domain.usage_record import RequestStatus, UsageRecord
from gateway.ledger.database import LedgerDatabase
from tests.gateway.ledger.support import make_record

END = dt.datetime(2026, 11, 20, 12, 0, tzinfo=dt.UTC)
MODELS = (("deepseek-v3.2", "deepseek"), ("gpt-4.1", "openai"), ("gemini-2.5-flash", "google"))
APPS = ("search", "support")
HOURS = 6


def _rows(n: int) -> list[UsageRecord]:
    """Long-tailed latencies (log-normal around 600 ms, a few slow ones up to minutes)."""
    rng = random.Random(29)
    out = []
    for i in range(n):
        model, provider = MODELS[i % 3]
        latency = max(1, int(rng.lognormvariate(6.4, 0.9)))
        if i % 97 == 0:
            latency *= 40  # the tail a p99 lands in
        at = END - dt.timedelta(seconds=rng.randrange(HOURS * 3600))
        out.append(
            make_record(
                request_id=uuid.uuid4(),
                started_at=at,
                ended_at=at + dt.timedelta(milliseconds=latency),
                app=APPS[i % 2],
                model=model,
                provider=provider,
                status=RequestStatus.OK,
                latency_ms=latency,
                ttft_ms=latency // 4 if i % 2 else None,
            )
        )
    return out


async def _write(url: str, records: list[UsageRecord]) -> None:
    db = LedgerDatabase(url, write_timeout_s=60, connect_timeout_s=5)
    try:
        for i in range(0, len(records), 2000):
            assert await db.write(records[i : i + 2000]) == []
    finally:
        await db.close()


def _rollup_frame(engine: Engine, grain: rollup_sql.Grain) -> pd.DataFrame:
    # the dashboard's own reading of a rollup, per model, over the whole period
    sql = _ROLLUP_HISTOGRAM_SQL.format(
        table=rollup_sql.LATENCY_TABLES[grain], where="true", model="u.model"
    )
    with engine.connect() as conn:
        return pd.DataFrame(conn.execute(text(sql)).mappings().all())


def _exact(engine: Engine, metric: str, q: float) -> dict[str, Any]:
    column = "latency_ms" if metric == "latency" else "ttft_ms"
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                f"SELECT model, percentile_disc(:q) WITHIN GROUP (ORDER BY {column})"
                f" FROM usage_records WHERE status = 'ok' AND {column} IS NOT NULL"
                " GROUP BY model"
            ),
            {"q": q},
        ).all()
    return {m: v for m, v in rows}


def test_percentiles_from_the_rollups_are_within_one_bin_of_the_exact_ones(
    database_url: str, ledger_engine: Engine, clean_ledger: None
) -> None:
    asyncio.run(_write(database_url, _rows(12_000)))
    for grain in rollup_sql.GRAINS:
        frame = _rollup_frame(ledger_engine, grain)
        for metric in ("latency", "ttft"):
            for q in (0.5, 0.9, 0.95, 0.99):
                exact = _exact(ledger_engine, metric, q)
                for model, want in exact.items():
                    part = frame[(frame["model"] == model) & (frame["metric"] == metric)]
                    got = percentile_from_bins(part["bin"], part["requests"], q)
                    assert got is not None
                    # within one bin: 2.02% of (1 + the exact value)
                    assert abs(got - want) <= RELATIVE_ERROR * (1 + want), (grain, metric, q)


def test_the_hourly_rollup_holds_one_row_per_hour_group_and_metric(
    database_url: str, ledger_engine: Engine, clean_ledger: None
) -> None:
    records = _rows(12_000)
    asyncio.run(_write(database_url, records))
    with ledger_engine.connect() as conn:
        hourly = conn.execute(
            text(f"SELECT count(*), sum(requests) FROM {rollup_sql.LATENCY_TABLES['hour']}")
        ).one()
        ttft_rows = conn.execute(
            text("SELECT count(*) FROM usage_records WHERE ttft_ms IS NOT NULL")
        ).scalar_one()
    # at most one row per hour (the span touches HOURS + 1) × app × model × metric
    assert hourly[0] <= (HOURS + 1) * len(APPS) * len(MODELS) * 2
    assert hourly[1] == len(records) + ttft_rows
    # the bound the issue asks for: at most one rollup row per 50 requests
    assert hourly[0] * 50 <= len(records)
