"""Routing changes are recorded with who, what before and after, and their outcome (pending
first, settled once), under a per-app lock; listed newest first."""

from __future__ import annotations

import time
from decimal import Decimal

import pytest
from sqlalchemy import Engine

from db.routing_audit import (
    RoutingLockBusy,
    list_routing_changes,
    record_routing_change,
    routing_change_lock,
)

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


def test_a_change_is_written_pending_and_settled_once(database_url: str) -> None:
    with routing_change_lock(database_url, "costgate", wait_s=5) as audit:
        row_id = audit.begin(
            "cli:ana", "auto", {"a": "1"}, {"a": "2"}, "why", version_before=4, version_after=5
        )
        (pending,) = list_routing_changes(database_url)
        assert (pending.id, pending.status, pending.outcome_at) == (row_id, "pending", None)
        assert (pending.version_before, pending.version_after) == (4, 5)
        audit.settle(row_id, "timed_out")
        # an outcome is final: a later settle of the same row changes nothing
        audit.settle(row_id, "applied")
        with pytest.raises(ValueError, match="not an outcome"):
            audit.settle(row_id, "pending")
    (row,) = list_routing_changes(database_url)
    assert row.status == "timed_out" and row.outcome_at >= row.changed_at


def test_a_row_recorded_with_its_outcome_is_dated_and_unknown_statuses_are_refused(
    database_url: str,
) -> None:
    record_routing_change(database_url, "a", "costgate", "auto", {}, {}, status="failed")
    (row,) = list_routing_changes(database_url)
    assert row.status == "failed" and row.outcome_at is not None
    with pytest.raises(ValueError, match="unknown routing change status"):
        record_routing_change(database_url, "a", "costgate", "auto", {}, {}, status="done")


def test_the_lock_is_per_app_and_a_waiter_gives_up_after_wait_s(database_url: str) -> None:
    with routing_change_lock(database_url, "costgate", wait_s=5):
        started = time.monotonic()
        with (
            pytest.raises(RoutingLockBusy, match="'costgate'"),
            routing_change_lock(database_url, "costgate", wait_s=0.3),
        ):
            pass
        assert 0.25 <= time.monotonic() - started < 5
        with routing_change_lock(database_url, "other-app", wait_s=0.3):
            pass
    # released on the way out: the next holder gets it at once
    with routing_change_lock(database_url, "costgate", wait_s=0.3):
        pass
