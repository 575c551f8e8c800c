"""Routing changes are appended with who, what before and after, and listed newest first."""

from __future__ import annotations

from decimal import Decimal

import pytest
from sqlalchemy import Engine

from db.routing_audit import list_routing_changes, record_routing_change

pytestmark = pytest.mark.usefixtures("clean_ledger")


def test_change_is_recorded_with_exact_weights_and_listed_newest_first(
    ledger_engine: Engine,
) -> None:
    before = {"deepseek-v3.2": Decimal("60"), "gemini-2.5-flash": Decimal("30.5")}
    after = {"deepseek-v3.2": Decimal("0"), "gemini-2.5-flash": Decimal("100")}
    first = record_routing_change(ledger_engine, "ops@x", "costgate", "auto", before, after)
    second = record_routing_change(
        ledger_engine, "cli", "costgate", "fast", None, {"a": 1}, note="drain"
    )
    changes = list_routing_changes(ledger_engine)
    assert [c.id for c in changes] == [second, first]
    assert changes[1].before == {"deepseek-v3.2": "60", "gemini-2.5-flash": "30.5"}
    assert changes[1].after["gemini-2.5-flash"] == "100"
    assert changes[0].before is None and changes[0].note == "drain"
    assert changes[0].changed_at.tzinfo is not None


def test_listing_filters_by_app_and_alias(database_url: str) -> None:
    record_routing_change(database_url, "a", "costgate", "auto", {}, {"x": 1})
    record_routing_change(database_url, "a", "other-app", "auto", {}, {"x": 2})
    record_routing_change(database_url, "a", "costgate", "fast", {}, {"x": 3})
    assert [c.after for c in list_routing_changes(database_url, app_name="costgate")] == [
        {"x": 3},
        {"x": 1},
    ]
    assert [c.after for c in list_routing_changes(database_url, alias="auto", limit=1)] == [
        {"x": 2}
    ]
