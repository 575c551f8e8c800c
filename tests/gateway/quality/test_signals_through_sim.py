"""The quality signals on real answers: the gateway's request path (GatewayService and
its HTTP app under uvicorn) against the sim, whose quality faults spoil answers the way
models do. Each spoiled answer is flagged on its record, and the flags land in the
ledger's columns."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy import Engine, text

from gateway.domain.usage_record import UsageRecord
from tests.fixtures.ledger_writes import write_records

MODEL = "gpt-4.1"  # its upstream id in the sim is the same
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOLS = [{"type": "function", "function": {"name": "weather", "parameters": SCHEMA}}]
JSON_MODE = {"response_format": {"type": "json_object"}}
STRUCTURED = {"response_format": {"type": "json_schema",
                                  "json_schema": {"name": "w", "schema": SCHEMA}}}  # fmt: skip
TOOL_CALL = {"tools": TOOLS, "tool_choice": "required"}


def _ask(gw: Any, stream: bool = False, **extra: Any) -> UsageRecord:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "weather in Oslo?"}],
            "max_tokens": 60, "stream": stream, **extra}  # fmt: skip
    before = len(gw.records)
    with httpx.Client(base_url=gw.base_url, timeout=30, headers=gw.headers) as client:
        r = client.post("/v1/chat/completions", json=body)
        assert r.status_code == 200, r.text
    return gw.wait_records(before + 1)[before]


def test_json_mode_answers_that_do_not_parse_are_flagged(gw: Any, sim: Any) -> None:
    assert _ask(gw, **JSON_MODE).json_valid is True
    sim.set_fault(MODEL, "bad_json")
    assert _ask(gw, **JSON_MODE).json_valid is False
    assert _ask(gw, stream=True, **JSON_MODE).json_valid is False
    assert _ask(gw, **STRUCTURED).json_valid is False


def test_tool_calls_whose_arguments_break_the_schema_are_flagged(gw: Any, sim: Any) -> None:
    assert _ask(gw, **TOOL_CALL).tool_args_valid is True
    sim.set_fault(MODEL, "bad_tool_args")
    flagged = _ask(gw, **TOOL_CALL)
    assert flagged.tool_args_valid is False and flagged.finish_reason == "tool_calls"


def test_truncated_answers_and_refusals_are_flagged(gw: Any, sim: Any) -> None:
    plain = _ask(gw)
    assert (plain.finish_reason, plain.refusal, plain.json_valid) == ("stop", False, None)
    sim.set_fault(MODEL, "truncate")
    assert _ask(gw).finish_reason == "length"
    assert _ask(gw, stream=True).finish_reason == "length"
    sim.clear_faults(MODEL)
    sim.set_fault(MODEL, "refusal")
    assert _ask(gw).refusal is True


def test_the_flags_are_stored_on_the_ledger_rows(
    gw: Any, sim: Any, database_url: str, ledger_engine: Engine, clean_ledger: None
) -> None:
    sim.set_fault(MODEL, "bad_json")
    records = [_ask(gw, **JSON_MODE)]
    sim.clear_faults(MODEL)
    sim.set_fault(MODEL, "bad_tool_args")
    records.append(_ask(gw, **TOOL_CALL))

    write_records(database_url, records)
    with ledger_engine.connect() as conn:
        rows = conn.execute(text(
            "SELECT request_id, finish_reason, refusal, json_valid, tool_args_valid "
            "FROM usage_records"
        )).all()  # fmt: skip
    assert {tuple(r) for r in rows} == {
        (records[0].request_id, "stop", False, False, None),
        (records[1].request_id, "tool_calls", False, None, False),
    }
