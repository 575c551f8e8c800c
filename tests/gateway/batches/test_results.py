"""A finished batch as ledger records and result files, hand-computed."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from decimal import Decimal as D
from pathlib import Path
from typing import Any

from gateway.batches.results import (
    anthropic_outcomes,
    finish,
    ledger_values,
    line_request_id,
    openai_outcomes,
)
from gateway.domain.config import load_config
from gateway.domain.pricing import PriceCatalog

CFG = load_config(Path(__file__).resolve().parents[3] / "config" / "costgate.example.yaml")
CATALOG = PriceCatalog.from_config(CFG)
NOW = dt.datetime(2026, 12, 4, 12, tzinfo=dt.UTC)


def _batch(api: str, custom_ids: list[str], model: str) -> dict[str, Any]:
    return {"id": "batch_x", "api": api, "app": "a", "team": None, "key_id": None,
            "provider": CFG.models_by_name[model].provider,
            "created_at": NOW - dt.timedelta(minutes=5),
            "lines": [{"custom_id": c, "requested": model, "model": model} for c in custom_ids]}


def _answer(custom_id: str) -> dict[str, Any]:
    usage = {"prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500}
    return {"custom_id": custom_id, "response": {"status_code": 200, "body": {
        "model": "gpt-4o-mini-upstream", "usage": usage,
        "choices": [{"message": {"role": "assistant", "content": "hi"}}]}}}


def test_each_line_is_one_record_at_the_batch_price_and_failures_bill_nothing() -> None:
    batch = _batch("openai", ["a", "b", "c"], "gpt-4o-mini")
    failed = {"custom_id": "b", "response": {"status_code": 500, "body": {"error": {}}}}
    done = finish(batch, openai_outcomes([_answer("a"), failed]), CFG, CATALOG, D("0.5"), NOW)
    a, b, c = done.records
    # gpt-4o-mini: 1,000 x $0.15/M + 500 x $0.60/M = $0.00045 live; half of it billed
    assert (a.list_cost_usd, a.actual_cost_usd) == (D("0.00045"), D("0.000225"))
    assert (a.endpoint.value, a.status.value, a.request_id) == (
        "batch", "ok", line_request_id("batch_x", "a"))
    assert (b.status.value, b.error_class, b.actual_cost_usd) == (
        "upstream_error", "batch_line_failed", None)
    assert (c.status.value, c.error_class) == ("upstream_error", "batch_line_expired")
    assert (done.billed_usd, done.list_usd, done.completed, done.failed) == (
        D("0.000225"), D("0.00045"), 1, 2)
    out = json.loads(done.output)
    assert out["custom_id"] == "a" and out["response"]["body"]["model"] == "gpt-4o-mini"
    assert [json.loads(x)["custom_id"] for x in done.errors.splitlines()] == ["b", "c"]
    assert ledger_values(a)["endpoint"] == "batch"


def test_finishing_twice_names_the_same_rows() -> None:
    batch = _batch("openai", ["a"], "gpt-4o-mini")
    first = finish(batch, openai_outcomes([_answer("a")]), CFG, CATALOG, D("0.5"), NOW)
    again = finish(batch, openai_outcomes([_answer("a")]), CFG, CATALOG, D("0.5"), NOW)
    assert first.records[0].request_id == again.records[0].request_id
    assert line_request_id("batch_x", "a") != line_request_id("batch_y", "a")
    assert isinstance(first.records[0].request_id, uuid.UUID)


def test_anthropic_results_are_priced_from_their_usage() -> None:
    batch = _batch("anthropic", ["m", "n"], "claude-haiku-4.5")
    message = {"model": "claude-haiku-4-5", "content": [{"type": "text", "text": "hi"}],
               "usage": {"input_tokens": 2000, "output_tokens": 100}}
    results = [{"custom_id": "m", "result": {"type": "succeeded", "message": message}},
               {"custom_id": "n", "result": {"type": "canceled"}}]
    done = finish(batch, anthropic_outcomes(results), CFG, CATALOG, D("0.5"), NOW)
    m, n = done.records
    # claude-haiku-4.5: 2,000 x $1/M + 100 x $5/M = $0.0025 live, $0.00125 at the batch rate
    assert (m.list_cost_usd, m.actual_cost_usd) == (D("0.0025"), D("0.00125"))
    assert n.error_class == "batch_line_canceled"
    lines = [json.loads(x) for x in done.output.splitlines()]
    assert [x["result"]["type"] for x in lines] == ["succeeded", "canceled"]
    assert lines[0]["result"]["message"]["model"] == "claude-haiku-4.5"
    assert done.errors == b""
