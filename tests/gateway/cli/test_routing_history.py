"""`costgate routing history` against the test database: each change with its outcome."""

from __future__ import annotations

import pytest

from db.routing_audit import record_routing_change, routing_change_lock
from gateway.cli.main import main


@pytest.mark.usefixtures("clean_ledger")
def test_history_shows_each_changes_outcome_and_versions(
    database_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DATABASE_URL", database_url)
    record_routing_change(database_url, "old", "costgate", "auto", {"a": "1"}, {"a": "2"})
    record_routing_change(
        database_url,
        "cli:bo",
        "costgate",
        "auto",
        {"a": "2"},
        {"a": "3"},
        "stale",
        status="failed",
        version_before=3,
        version_after=4,
    )
    with routing_change_lock(database_url, "costgate", wait_s=5) as audit:
        audit.begin(
            "ops:ana", "auto", {"a": "2"}, {"a": "9"}, None, version_before=3, version_after=4
        )
    assert main(["routing", "history"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "PENDING v3→v4 ops:ana auto" in lines[0]
    assert "FAILED v3→v4 cli:bo auto" in lines[1] and lines[2].strip() == "stale"
    # a row from before versions were recorded: its status, no versions
    assert "APPLIED old auto: {'a': '1'} → {'a': '2'}" in lines[3]
