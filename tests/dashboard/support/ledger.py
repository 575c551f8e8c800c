"""Writing records into the test ledger and reading independent sums back (test helpers)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from sqlalchemy import Engine, insert, text

from db.models import UsageRow
from gateway.domain.usage_record import UsageRecord


def insert_records(engine: Engine, records: Iterable[UsageRecord]) -> None:
    tagged, untagged = [], []
    for r in records:
        row = dataclasses.asdict(r)
        row["fallback_path"] = list(r.fallback_path)
        row["status"], row["usage_source"] = str(r.status), str(r.usage_source)
        if row["tags"] is None:
            # left out, so the column is SQL NULL: a None would be stored as JSON null,
            # which the tag rollup's trigger cannot expand
            del row["tags"]
            untagged.append(row)
        else:
            tagged.append(row)
    with engine.begin() as conn:
        for rows in (tagged, untagged):
            if rows:
                conn.execute(insert(UsageRow), rows)


def sql_sums(engine: Engine, where: str = "TRUE", **params: Any) -> dict[str, Any]:
    """Sums straight from usage_records, written apart from dashboard.queries on purpose."""
    sql = f"""
        SELECT count(*) AS requests,
               sum(actual_cost_usd) AS spend,
               -- docs/SAVINGS.md: baseline (or list) at list, cached tokens at full input
               sum(coalesce(baseline_cost_usd, list_cost_usd) + coalesce(
                   cached_prompt_tokens * (
                       SELECT pv.list_input - pv.list_cached_input FROM price_versions pv
                       WHERE pv.id = price_version_id
                   ) * 0.000001, 0)
               ) FILTER (WHERE actual_cost_usd IS NOT NULL) AS no_costgate,
               sum(list_cost_usd) AS list_spend,
               sum(list_cost_usd) - sum(actual_cost_usd) AS savings,
               sum(baseline_cost_usd - list_cost_usd) AS routing_savings,
               coalesce(sum(prompt_tokens), 0) + coalesce(sum(completion_tokens), 0) AS tokens,
               count(*) FILTER (WHERE status <> 'ok') AS errors
        FROM usage_records WHERE {where}
    """
    with engine.connect() as conn:
        return dict(conn.execute(text(sql), params).mappings().one())


def shown_money(value: str) -> Decimal:
    """'$1,234.56' / '-$0.0012' -> Decimal, keeping the places shown."""
    negative = value.startswith("-")
    amount = Decimal(value.lstrip("-").lstrip("$").replace(",", ""))
    return -amount if negative else amount


def same_as_shown(shown: str, exact: Decimal) -> bool:
    value = shown_money(shown)
    return exact.quantize(value) == value
