"""An experiment's results from a real ledger: per variant its requests, cost, latency,
signals and feedback, each measure's difference against the control with Welch's 95%
interval, as `costgate experiments show` prints them."""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal
from typing import Any

from sqlalchemy import Engine, text

from db.quality.experiment_report import build_results
from gateway.cli.experiments.results import render_results
from gateway.experiments.spec import Experiment
from tests.fixtures.ledger_writes import write_records
from tests.gateway.ledger.support import make_record

NOW = dt.datetime.now(dt.UTC)
EXP = Experiment(alias="auto", variants={"dear": {"gpt-4.1": Decimal(1)},
                                         "cheap": {"deepseek-v3.2": Decimal(1)}},
                 split={"dear": 50, "cheap": 50}, started_at=NOW)  # fmt: skip


def _rows(rng: random.Random) -> tuple[list[Any], list[tuple[Any, Decimal]]]:
    records, scores = [], []
    for i in range(400):
        variant = ("dear", "cheap")[i % 2]
        cost = Decimal(rng.randint(900, 1100) if variant == "dear" else rng.randint(90, 110))
        r = make_record(started_at=NOW, ended_at=NOW, alias="auto", experiment="e1",
                        variant=variant, model=next(iter(EXP.variants[variant])),
                        actual_cost_usd=cost / 10**7, latency_ms=rng.randint(300, 500),
                        finish_reason="length" if variant == "cheap" and i % 10 == 1 else "stop",
                        end_user=f"u{i % 40}")  # fmt: skip
        records.append(r)
        up = rng.random() < (0.9 if variant == "dear" else 0.6)
        scores.append((r.request_id, Decimal(1 if up else 0)))
    return records, scores


def test_the_cheaper_variant_costs_less_and_scores_lower_with_intervals_excluding_zero(
    database_url: str, ledger_engine: Engine, clean_ledger: None
) -> None:
    records, scores = _rows(random.Random(7))

    write_records(database_url, records)
    insert = text("INSERT INTO feedback (request_id, rater, app, score) "
                  "VALUES (:r, 'u', 'checkout', :s)")  # fmt: skip
    with ledger_engine.begin() as conn:
        for rid, score in scores:
            conn.execute(insert, {"r": rid, "s": score})
    results = build_results(database_url, "e1", EXP)
    assert [v["variant"] for v in results["variants"]] == ["dear", "cheap"]  # control first
    by = {v["variant"]: v for v in results["variants"]}
    assert by["dear"]["control"] and by["dear"]["requests"] == by["cheap"]["requests"] == 200
    assert by["cheap"]["cost_per_request_usd"] < by["dear"]["cost_per_request_usd"]
    cost, score = by["cheap"]["measures"]["cost_usd"], by["cheap"]["measures"]["feedback"]
    assert cost["high"] < 0 and cost["excludes_zero"]
    assert score["n"] == 200 and score["high"] < 0 and score["excludes_zero"]
    truncated = by["cheap"]["measures"]["truncated_rate"]
    assert truncated["mean"] == 0.2 and truncated["low"] > 0  # i % 10 == 1: 1 in 5 odd i
    assert "diff" not in by["dear"]["measures"]["cost_usd"]  # the control has none
    exact = sum((r.actual_cost_usd for r in records if r.variant == "cheap"), Decimal(0))
    assert by["cheap"]["cost_usd"] == exact
    shown = render_results("e1", EXP, results)
    assert "cheap: 200 requests" in shown and "feedback score" in shown and " *" in shown
