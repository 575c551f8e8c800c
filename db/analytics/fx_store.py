"""Dated FX rates in `fx_rates`: add one, import a CSV, load the schedule; and the price
versions the rates make, stored beside the config's (docs/FINANCE.md)."""

from __future__ import annotations

import csv
import datetime as dt
import io
from collections.abc import Iterable
from decimal import Decimal, InvalidOperation

from sqlalchemy import Engine, select
from sqlalchemy.dialects.postgresql import insert as pg_insert

from db.engine import engine_scope
from db.models import FxRate as FxRateRow
from db.price_sync import sync_prices
from gateway.domain.config import Config
from gateway.finance.fx import FxRate, FxSchedule


class FxImportError(ValueError):
    """A rates file that cannot be read; the message names the line."""


def parse_rates_csv(text: str) -> list[FxRate]:
    """`currency,effective_from,per_usd` (a header line; one rate per line)."""
    reader = csv.DictReader(io.StringIO(text.lstrip("\ufeff")))
    needed = ("currency", "effective_from", "per_usd")
    missing = [c for c in needed if c not in (reader.fieldnames or ())]
    if missing:
        raise FxImportError(f"missing column(s) {', '.join(missing)}")
    out = []
    for i, row in enumerate(reader, start=2):
        try:
            out.append(
                FxRate(
                    row["currency"].strip().upper(),
                    dt.date.fromisoformat(row["effective_from"].strip()),
                    Decimal(row["per_usd"].strip()),
                )
            )
        except (ValueError, InvalidOperation, AttributeError) as err:
            raise FxImportError(f"line {i}: {err}") from None
    return out


def save_rates(engine_or_url: Engine | str | None, rates: Iterable[FxRate], source: str) -> int:
    """Insert or replace rates (a rate for the same currency and day is corrected)."""
    values = [
        {
            "currency": r.currency,
            "effective_from": r.effective_from,
            "per_usd": r.per_usd,
            "source": source,
        }
        for r in rates
    ]
    if not values:
        return 0
    stmt = pg_insert(FxRateRow).values(values)
    stmt = stmt.on_conflict_do_update(
        index_elements=["currency", "effective_from"],
        set_={"per_usd": stmt.excluded.per_usd, "source": stmt.excluded.source},
    )
    with engine_scope(engine_or_url) as engine, engine.begin() as conn:
        conn.execute(stmt)
    return len(values)


def load_schedule(engine_or_url: Engine | str | None) -> FxSchedule:
    with engine_scope(engine_or_url) as engine, engine.connect() as conn:
        rows = conn.execute(
            select(FxRateRow.currency, FxRateRow.effective_from, FxRateRow.per_usd)
        ).all()
    return FxSchedule.of(FxRate(c, d, p) for c, d, p in rows)


def sync_dated_versions(engine_or_url: Engine | str | None, cfg: Config) -> int:
    """Store the price versions the dated rates make of the config's catalog (the ids
    replicas stamp on records priced at them); returns how many were new."""
    return sync_prices(engine_or_url, cfg).versions_inserted
