"""`costgate quality signals`: each signal's rate per model and alias, among the rows where
it applies, from a real ledger."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from sqlalchemy import Engine

from gateway.cli.main import main
from gateway.domain.usage_record import RequestStatus
from tests.fixtures.ledger_writes import write_records
from tests.gateway.ledger.support import make_record


def test_rates_per_model_and_alias(database_url: str, ledger_engine: Engine, clean_ledger: None,
                                   monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    monkeypatch.setenv("DATABASE_URL", database_url)
    now = dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)
    rows = [make_record(started_at=now, ended_at=now, model="gpt-4.1", alias="auto",
                        finish_reason="length" if i < 2 else "stop", refusal=False,
                        json_valid=i != 0 if i < 4 else None, fallback_path=("gpt-4.1",))
            for i in range(8)]  # fmt: skip
    rows.append(make_record(started_at=now, ended_at=now, model="gpt-4.1", alias="auto",
                            status=RequestStatus.UPSTREAM_ERROR, http_status=502,
                            fallback_path=("gpt-4.1", "gpt-4.1-mini")))  # fmt: skip
    rows.append(make_record(started_at=now, ended_at=now, model="gpt-4.1", alias=None,
                            tool_args_valid=False, finish_reason="tool_calls",
                            fallback_path=("gpt-4.1",)))  # fmt: skip

    write_records(database_url, rows)
    assert main(["quality", "signals", "--days", "1", "--json"]) == 0
    by = {(r["model"], r["alias"]): r for r in json.loads(capsys.readouterr().out)}
    auto = by[("gpt-4.1", "auto")]
    assert auto["requests"] == 9 and auto["error_rate"] == pytest.approx(1 / 9)
    assert auto["fallback_rate"] == pytest.approx(1 / 9)
    assert auto["truncated_rate"] == pytest.approx(2 / 8)  # the failed row has no finish
    assert (auto["json_invalid_rate"], auto["json_n"]) == (0.25, 4)
    assert auto["tool_args_invalid_rate"] is None and auto["tool_n"] == 0
    direct = by[("gpt-4.1", None)]
    assert (direct["tool_args_invalid_rate"], direct["tool_n"]) == (1.0, 1)
    assert main(["quality", "signals", "--days", "1"]) == 0
    assert "25.0%" in capsys.readouterr().out
