"""`costgate report` prints the usage API's figures as a table, CSV and JSON, equal to SQL
sums over the ledger; `costgate rollups` rebuilds, prunes past retention and reports."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from decimal import Decimal

import pytest
from sqlalchemy import Engine, text

from gateway.cli.main import main
from gateway.devtools.seed import seed_ledger
from gateway.domain.config import default_config_path, load_config

CFG = load_config(default_config_path())
END = dt.datetime(2026, 11, 20, 0, 0, tzinfo=dt.UTC)
ARGS = ["--start", "2026-11-10", "--end", "2026-11-20"]


@pytest.fixture
def seeded(database_url: str, ledger_engine: Engine, clean_ledger: None,
           monkeypatch: pytest.MonkeyPatch) -> Engine:
    monkeypatch.setenv("DATABASE_URL", database_url)
    seed_ledger(database_url, CFG, 2000, days=10, end=END, seed=3)
    return ledger_engine


def _sql(engine: Engine, sql: str) -> list[tuple[object, ...]]:
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(text(sql)).all()]


def test_costs_as_csv_by_project_equal_sql_sums(
    seeded: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", "costs", *ARGS, "--group-by", "project_id", "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert {"start", "end", "project_id", "amount_usd", "num_model_requests"} <= set(rows[0])
    got: dict[str, Decimal] = {}
    for r in rows:
        got[r["project_id"]] = got.get(r["project_id"], Decimal(0)) + Decimal(r["amount_usd"] or 0)
    want = _sql(seeded, "SELECT app, sum(actual_cost_usd) FROM usage_records GROUP BY app")
    assert got == {app: total for app, total in want}


def test_completions_as_json_is_the_apis_page_with_every_day(
    seeded: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", "completions", *ARGS, "--group-by", "model", "--format", "json"]) == 0
    page = json.loads(capsys.readouterr().out, parse_float=Decimal)
    assert page["object"] == "page" and page["has_more"] is False and len(page["data"]) == 10
    total = sum(r["input_tokens"] for b in page["data"] for r in b["results"])
    ((want,),) = _sql(
        seeded,
        "SELECT sum(prompt_tokens) FROM usage_records WHERE endpoint <> 'embeddings'",
    )
    assert total == want


def test_the_table_has_a_total_line_and_a_bad_group_is_refused(
    seeded: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", "completions", *ARGS]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["start", "end", "input_tokens"]
    ((n,),) = _sql(seeded, "SELECT count(*) FROM usage_records WHERE endpoint <> 'embeddings'")
    assert lines[-1].split()[0] == "total" and lines[-1].split()[-1] == str(n)
    assert main(["report", "completions", *ARGS, "--group-by", "line_item"]) == 2
    assert "group_by" in capsys.readouterr().err


def test_rollups_prune_keeps_the_reports_figures_and_rebuild_keeps_them_too(
    seeded: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", "costs", *ARGS, "--format", "json"]) == 0
    before = capsys.readouterr().out
    days = (dt.datetime.now(dt.UTC).date() - dt.date(2026, 11, 15)).days
    assert main(["rollups", "prune", "--days", str(days)]) == 0
    assert "pruned" in capsys.readouterr().out
    ((first,),) = _sql(seeded, "SELECT min(started_at) FROM usage_records")
    assert first >= dt.datetime(2026, 11, 15, tzinfo=dt.UTC)
    assert main(["rollups", "rebuild"]) == 0
    assert main(["rollups", "status"]) == 0
    status = capsys.readouterr().out
    assert "raw rows pruned before: 2026-11-15" in status
    assert main(["report", "costs", *ARGS, "--format", "json"]) == 0
    assert capsys.readouterr().out == before


def test_rollups_close_sums_every_ended_day_and_status_says_up_to_when(
    seeded: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["rollups", "close"]) == 0
    assert "rows written for the days that ended" in capsys.readouterr().out
    assert main(["rollups", "status"]) == 0
    today = dt.datetime.now(dt.UTC).date()
    assert f"end users by kind closed before: {today:%Y-%m-%d}" in capsys.readouterr().out


def test_prune_without_retention_keeps_everything(
    seeded: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["rollups", "prune"]) == 0
    assert "every raw row is kept" in capsys.readouterr().out
    assert _sql(seeded, "SELECT count(*) FROM usage_records") == [(2000,)]


@pytest.fixture
def attributed(database_url: str, ledger_engine: Engine, clean_ledger: None,
               monkeypatch: pytest.MonkeyPatch) -> Engine:
    from tests.db.analytics.attribution_seed import write_attributed

    monkeypatch.setenv("DATABASE_URL", database_url)
    write_attributed(database_url)
    return ledger_engine


ATTR_ARGS = ["--start", "2026-11-17", "--end", "2026-11-20"]


def test_costs_by_user_carry_the_same_money_columns_and_equal_sql(
    attributed: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", "costs", *ATTR_ARGS, "--by", "user", "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert list(rows[0])[:3] == ["start", "end", "user_id"]
    assert {"amount_usd", "list_amount_usd", "baseline_amount_usd"} <= set(rows[0])
    got: dict[str, Decimal] = {}
    for r in rows:
        got[r["user_id"]] = got.get(r["user_id"], Decimal(0)) + Decimal(r["amount_usd"] or 0)
    want = _sql(attributed, "SELECT end_user, sum(actual_cost_usd) FROM usage_records"
                " WHERE end_user IS NOT NULL GROUP BY 1")  # fmt: skip
    assert got == {u: total for u, total in want} and len(got) == 7


def test_completions_by_tag_with_a_second_tag_read_raw_rows_a_day_a_page(
    attributed: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["report", "completions", *ATTR_ARGS, "--by", "tag:feature", "--tags", "env:prod"]
    assert main([*argv, "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    got: dict[str, int] = {}
    for r in rows:
        got[r["tag:feature"]] = got.get(r["tag:feature"], 0) + int(r["input_tokens"])
    want = _sql(attributed, "SELECT tags->>'feature', sum(prompt_tokens) FROM usage_records"
                " WHERE tags->>'env' = 'prod' AND endpoint <> 'embeddings' GROUP BY 1")
    assert got == {f: int(n) for f, n in want if f is not None} and len(got) == 3
    assert main([*argv]) == 0
    table = capsys.readouterr().out
    assert table.splitlines()[0].split()[:3] == ["start", "end", "tag:feature"]
    assert table.splitlines()[-1].startswith("total")
