"""`costgate export focus`, `whatif`, `reconcile` and `fx` against the test database,
on the seeded ledger of tests/db/analytics/finance_seed.py (hand-computed figures)."""

from __future__ import annotations

import csv
import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

import pytest
from sqlalchemy import text

from db.analytics.fx_store import load_schedule
from gateway.cli.main import main
from gateway.domain.config import default_config_path, load_config
from gateway.finance.focus_columns import HEADER, MANDATORY, check_rows
from gateway.finance.fx_refresh import FxRefresher
from gateway.replica.service import GatewayService
from tests.db.analytics.finance_seed import (
    LEDGER_LIST_USD,
    clean_finance_tables,
    seed_finance_ledger,
)

D = Decimal
PERIOD = ["--start", "2026-11-02", "--end", "2026-11-03"]
pytestmark = pytest.mark.usefixtures("clean_ledger")


@pytest.fixture
def seeded(database_url, ledger_engine, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", database_url)
    clean_finance_tables(ledger_engine)
    seed_finance_ledger(ledger_engine, load_config(default_config_path()))
    return ledger_engine


def test_export_focus_writes_a_csv_that_keeps_the_column_rules(seeded, tmp_path, capsys):
    out = tmp_path / "focus.csv"
    assert main(["export", "focus", *PERIOD, "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"list cost in USD: {LEDGER_LIST_USD}" in printed
    with out.open() as f:
        reader = csv.DictReader(f)
        assert tuple(reader.fieldnames or ()) == HEADER
        rows = [{k: (v or None) for k, v in r.items()} for r in reader]
    assert set(MANDATORY) <= set(HEADER)
    assert check_rows(rows) == []
    assert sum(D(r["x_ListCostUsd"]) for r in rows) == LEDGER_LIST_USD
    assert {r["BillingCurrency"] for r in rows} == {"USD", "CNY"}


def test_an_empty_period_exports_a_header_only(seeded, tmp_path):
    out = tmp_path / "empty.csv"
    assert main(["export", "focus", "--start", "2020-01-01", "--end", "2020-01-02",
                 "--output", str(out)]) == 0  # fmt: skip
    assert out.read_text().strip().split(",")[0] == "BilledCost"
    assert main(["export", "focus", "--start", "2026-11-03", "--end", "2026-11-02",
                 "--output", str(out)]) == 2  # fmt: skip


def test_whatif_prints_the_difference_by_app_model_and_day(seeded, capsys):
    argv = ["whatif", *PERIOD, "--routing", "auto:gpt-4.1=1", "--json"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    checkout = next(r for r in report["app"] if r["app"] == "checkout")
    assert (D(checkout["ledger_usd"]), D(checkout["whatif_usd"])) == (D("0.4396"), D("5.70"))
    assert D(report["total"][0]["difference_usd"]) == D("5.2604")
    assert {r["day"] for r in report["day"]} == {"2026-11-02", "2026-11-03"}
    assert main(["whatif", *PERIOD, "--model", "gpt-7"]) == 2
    assert "no stored price version for model 'gpt-7'" in capsys.readouterr().err
    assert main(["whatif", *PERIOD, "--price", "gpt-4.1:input=abc"]) == 2


OPENAI_EXPORT = """start_time,end_time,amount_value,amount_currency,line_item,project_id,project_name,organization_id,organization_name
1793577600,1793664000,2.00,usd,"gpt-4.1-2025-04-14, input",proj_1,bot,org_1,Acme
1793577600,1793664000,8.00,usd,"gpt-4.1-2025-04-14, output",proj_1,bot,org_1,Acme
"""  # noqa: E501
ANTHROPIC_EXPORT = """usage_date_utc,model,workspace,api_key,usage_type,context_window,token_type,cost_usd,list_price_usd,cost_type
2026-11-03,Claude Haiku 4.5,Default,bot,message,≤ 200k,input_no_cache,1.00,1.00,token
2026-11-03,Claude Haiku 4.5,Default,bot,message,≤ 200k,output,0.48,0.48,token
"""  # noqa: E501


def test_reconcile_exits_non_zero_when_a_difference_exceeds_the_threshold(seeded, tmp_path, capsys):
    openai = tmp_path / "openai.csv"
    openai.write_text(OPENAI_EXPORT)
    argv = ["reconcile", *PERIOD, "--provider", "openai"]
    assert main([*argv, "--file", str(openai), "--format", "openai"]) == 0
    assert "0 over the threshold" in capsys.readouterr().out
    anthropic = tmp_path / "anthropic.csv"
    anthropic.write_text(ANTHROPIC_EXPORT)
    argv = ["reconcile", *PERIOD, "--provider", "anthropic"]
    # the ledger says $1.50, the console $1.48
    assert main([*argv, "--file", str(anthropic), "--format", "anthropic"]) == 1
    printed = capsys.readouterr().out
    assert "claude-haiku-4.5" in printed and "0.020000  <-- over threshold" in printed
    assert main([*argv, "--threshold", "0.02"]) == 0  # the lines stay imported
    assert main([*argv, "--threshold", "0", "--threshold-pct", "2"]) == 0  # 2% of $1.48


def test_reconcile_a_relay_in_its_currency_from_a_generic_csv(seeded, tmp_path, capsys):
    bill = tmp_path / "relay.csv"
    bill.write_text("Date,Model,Yuan\n2026-11-03,gpt-4.1,10.00\n2026-11-03,deepseek-chat,6.30\n")
    argv = ["reconcile", *PERIOD, "--provider", "relay", "--file", str(bill),
            "--format", "generic", "--map", "day=Date,model=Model,amount=Yuan"]  # fmt: skip
    assert main(argv) == 2  # no currency: refused, nothing imported
    assert "currency" in capsys.readouterr().err
    assert main([*argv, "--currency", "CNY"]) == 0
    assert "2 day/model pairs in CNY; 0 over the threshold" in capsys.readouterr().out
    assert main(["reconcile", *PERIOD, "--provider", "nobody"]) == 2


async def test_fx_add_and_import_store_rates_and_the_versions_replicas_price_with(
    seeded, tmp_path, capsys, database_url
):
    today = dt.datetime.now(dt.UTC).date()
    assert main(["fx", "add", "CNY", "7.1", "--from", "2026-11-01"]) == 0
    assert "1 FX rate(s) saved" in capsys.readouterr().out
    rates = tmp_path / "rates.csv"
    rates.write_text(f"currency,effective_from,per_usd\nCNY,{today.isoformat()},7.0\n")
    assert main(["fx", "import", str(rates)]) == 0
    assert main(["fx", "list"]) == 0
    listing = capsys.readouterr().out
    assert "CNY  from 2026-11-01  7.1 per USD" in listing
    assert f"CNY  from {today.isoformat()}  7 per USD" in listing
    bad = tmp_path / "bad.csv"
    bad.write_text("currency,effective_from,per_usd\nCNY,2026-13-01,7\n")
    assert main(["fx", "import", str(bad)]) == 2
    with seeded.connect() as conn:
        fx = set(conn.execute(text(
            "SELECT fx_per_usd FROM price_versions WHERE model = 'relay-gpt-4.1'"
        )).scalars())  # fmt: skip
    assert fx == {D("7.3"), D("7.1"), D("7.0")}  # the stored 7.3 version is kept
    # what a replica loads: today's rate prices new requests
    service = GatewayService(load_config(default_config_path()))
    try:
        await FxRefresher(service, lambda: load_schedule(database_url)).refresh()
        version = service.catalog.versions["relay-gpt-4.1"]
        assert version.fx_per_usd == D("7.0")
        with seeded.connect() as conn:
            stored = conn.execute(
                text("SELECT count(*) FROM price_versions WHERE id = :id"), {"id": version.id}
            ).scalar_one()
        assert stored == 1  # the id the replica stamps is a stored version
    finally:
        await service.aclose()


def test_paths_that_do_not_exist_are_an_error_not_a_traceback(seeded, capsys):
    assert main(["fx", "import", str(Path("/nonexistent/rates.csv"))]) == 2
    argv = ["reconcile", *PERIOD, "--provider", "openai", "--file", "/nonexistent.csv"]
    assert main([*argv, "--format", "openai"]) == 2


def _focus(tmp_path, *extra):
    out = tmp_path / "focus.csv"
    assert main(["export", "focus", *PERIOD, "--output", str(out), *extra]) == 0
    with out.open() as f:
        return [{k: (v or None) for k, v in r.items()} for r in csv.DictReader(f)]


def test_export_focus_split_by_end_user_or_tag_carries_it_in_tags(seeded, tmp_path):
    plain = _focus(tmp_path)
    by_user = _focus(tmp_path, "--split-by", "user")
    assert check_rows(by_user) == []
    # the same money, the checkout deepseek group now in two: one row set per end user
    assert sum(D(r["x_ListCostUsd"]) for r in by_user) == LEDGER_LIST_USD
    assert sum(D(r["BilledCost"]) for r in by_user) == sum(D(r["BilledCost"]) for r in plain)
    requests: dict[str | None, int] = {}
    for r in by_user:
        user = json.loads(r["Tags"]).get("costgate:end_user")
        requests[user] = requests.get(user, 0) + int(r["x_LedgerRequests"])
    assert requests == {"u-a": 2, "u-b": 1, None: 4}
    assert all(json.loads(r["Tags"])["app"] for r in by_user)
    assert len(by_user) == len(plain) + 3  # deepseek's 3 token classes, once more
    by_tag = _focus(tmp_path, "--split-by", "tag:feature")
    features = {json.loads(r["Tags"]).get("feature") for r in by_tag}
    assert features == {"search", "chat", None}
    assert sum(D(r["x_ListCostUsd"]) for r in by_tag) == LEDGER_LIST_USD


def test_export_focus_refuses_a_bad_split(seeded, tmp_path, capsys):
    out = tmp_path / "focus.csv"
    assert main(["export", "focus", *PERIOD, "--output", str(out), "--split-by", "model"]) == 2
    assert "--split-by" in capsys.readouterr().err
