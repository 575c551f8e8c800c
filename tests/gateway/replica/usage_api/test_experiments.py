"""The usage and costs API by experiment and variant, on the gateway's own FastAPI app in
process over a real PostgreSQL ledger: the rows that served an experiment, grouped by it
and its variant, with the same totals as a plain SQL sum."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import Engine, text

from tests.fixtures.ledger_writes import write_records
from tests.gateway.ledger.support import make_record
from tests.gateway.replica.usage_api.admin_client import admin_client

DAY = dt.datetime(2026, 11, 20, tzinfo=dt.UTC)


@pytest.fixture
def get(database_url: str, ledger_engine: Engine, clean_ledger: None) -> Any:
    at = [DAY + dt.timedelta(hours=i) for i in range(30)]
    rows = [make_record(started_at=at[i], ended_at=at[i], experiment=None if i % 3 == 0 else "e1",
                        variant=None if i % 3 == 0 else ("a", "b")[i % 2],
                        actual_cost_usd=Decimal(i) / 10**6)
            for i in range(30)]  # fmt: skip

    write_records(database_url, rows)
    with admin_client(database_url) as client:
        yield client


def test_costs_and_usage_by_experiment_and_variant_match_the_rows(
    get: Any, ledger_engine: Engine
) -> None:
    start, end = int(DAY.timestamp()), int((DAY + dt.timedelta(days=2)).timestamp())
    r = get("costs", start_time=start, end_time=end, group_by="experiment,variant")
    assert r.status_code == 200, r.text
    got: dict[tuple[str, str], Decimal] = {}
    for bucket in json.loads(r.text, parse_float=Decimal)["data"]:
        for res in bucket["results"]:
            key = (res["experiment"], res["variant"])
            got[key] = got.get(key, Decimal(0)) + res["amount"]["value"]
    with ledger_engine.connect() as conn:
        want = {(e, v): s for e, v, s in conn.execute(text(
            "SELECT experiment, variant, sum(actual_cost_usd) FROM usage_records "
            "WHERE experiment IS NOT NULL GROUP BY 1, 2")).all()}  # fmt: skip
    assert got == want and set(got) == {("e1", "a"), ("e1", "b")}
    usage = get("usage/completions", start_time=start, end_time=end, bucket_width="1h",
                limit=48, group_by="variant")  # fmt: skip
    assert usage.status_code == 200, usage.text
    requests = sum(res["num_model_requests"] for b in usage.json()["data"] for res in b["results"])
    assert requests == 20
    plain = get("costs", start_time=start, end_time=end, group_by="model").json()
    assert "experiment" not in plain["data"][0]["results"][0]
