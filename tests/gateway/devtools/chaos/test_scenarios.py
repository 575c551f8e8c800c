"""Scenario bookkeeping: selection and order, sizes, durations, the hostile bodies."""

from __future__ import annotations

import json

import pytest

from gateway.devtools.chaos.bookkeeping import DEFAULT, QUICK, Context
from gateway.devtools.chaos.hostile import hostile_bodies
from gateway.devtools.chaos.scenarios import SCENARIOS, UnknownScenario, select
from gateway.devtools.chaos.schema_fuzz import CHAT_PATH, with_chat_body
from gateway.devtools.chaos.soak import parse_duration


def test_select_keeps_the_run_order_and_refuses_unknown_names() -> None:
    assert select(None) == list(SCENARIOS)
    assert select(["down", "db-cut", "hostile"]) == ["hostile", "db-cut", "down"]
    assert list(SCENARIOS)[-1] == "down"  # it takes the gateway away: last
    with pytest.raises(UnknownScenario, match="db-cutt"):
        select(["db-cutt"])


def test_the_brief_s_scenarios_are_all_there() -> None:
    assert set(SCENARIOS) == {"schemathesis", "hostile", "db-cut", "replica-kill",
                              "replica-kill-db-down", "down", "redeploy", "upstream-faults",
                              "spool-disk-full", "redeploy-db-down"}  # fmt: skip


def test_quick_is_smaller_than_default_everywhere_it_costs_time() -> None:
    for field in ("rps", "load_s", "outage_s", "fuzz_examples"):
        assert getattr(QUICK, field) < getattr(DEFAULT, field)
    assert DEFAULT.outage_s == 60 and DEFAULT.fault_rate == 0.2
    assert QUICK.big_body_mib == DEFAULT.big_body_mib == 64  # the acceptance's size


def test_each_scenario_sends_as_an_app_of_its_own() -> None:
    ctx = Context(stack=None, sizes=QUICK, run_id="r1")  # type: ignore[arg-type]
    apps = {ctx.app(name) for name in SCENARIOS}
    assert len(apps) == len(SCENARIOS) and "chaos-db-cut-r1" in apps


@pytest.mark.parametrize(("text", "seconds"), [("30m", 1800), ("90s", 90), ("1h", 3600),
                                               ("45", 45), ("0.5m", 30)])
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "m", "-5m", "0", "soon"])
def test_parse_duration_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_hostile_bodies_are_what_their_names_say() -> None:
    bodies = hostile_bodies()
    with pytest.raises(UnicodeDecodeError):
        bodies["invalid-utf8"].decode()
    assert bodies["empty-body"] == b""
    assert bodies["nested-json-bomb"].count(b"[") >= 100_000
    with pytest.raises(RecursionError):
        json.loads(bodies["nested-object-bomb"])
    assert "\ud800" in json.loads(bodies["lone-surrogate-content"])["messages"][0]["content"]
    assert json.loads(bodies["negative-max-tokens"])["max_tokens"] == -1
    assert "\x00" in json.loads(bodies["control-chars-in-model"])["model"]
    assert len(bodies["model-3mib"]) > 3 * 2**20


def test_the_fuzzed_schema_describes_the_chat_body_and_bearer_auth() -> None:
    served = {"openapi": "3.1.0", "info": {"title": "t", "version": "1"},
              "paths": {CHAT_PATH: {"post": {"responses": {"200": {"description": "ok"}}}}}}
    schema = with_chat_body(served)
    body = schema["paths"][CHAT_PATH]["post"]["requestBody"]["content"]["application/json"]
    assert body["schema"]["required"] == ["model", "messages"]
    assert schema["security"] == [{"bearer": []}]
    assert "requestBody" not in served["paths"][CHAT_PATH]["post"]  # the served one untouched
