"""The batch tables on a real PostgreSQL: a batch ends exactly once, one replica holds the
poll lease, and another app's file or batch is not found."""

from __future__ import annotations

import datetime as dt
import uuid
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal as D
from typing import Any

from sqlalchemy import Engine, text

from db.batches import store


def _batch(batch_id: str = "batch_1", app: str = "a") -> dict[str, Any]:
    return {"id": batch_id, "api": "openai", "app": app, "team": None, "key_id": None,
            "provider": "openai", "provider_batch_id": "up_1",
            "endpoint": "/v1/chat/completions", "completion_window": "24h",
            "status": "in_progress", "lines": [{"custom_id": "c", "requested": "m",
                                                "model": "m"}],
            "created_at": dt.datetime.now(dt.UTC)}


def _row(request_id: uuid.UUID) -> dict[str, Any]:
    now = dt.datetime.now(dt.UTC)
    return {"request_id": request_id, "started_at": now, "ended_at": now, "app": "a",
            "requested_model": "m", "stream": False, "status": "ok", "http_status": 200,
            "usage_source": "provider", "latency_ms": 1, "attempts": 1, "endpoint": "batch",
            "actual_cost_usd": D("0.5"), "list_cost_usd": D("1")}


def test_a_batch_ends_once_whoever_finishes_it(ledger_engine: Engine, clean_ledger: None
                                               ) -> None:
    store.add_batch(ledger_engine, _batch())
    request_id = uuid.uuid4()
    ids = [{"request_id": request_id, "batch_id": "batch_1", "custom_id": "c"}]
    values = {"status": "completed", "billed_usd": D("0.5")}
    assert store.finish_batch(ledger_engine, "batch_1", [_row(request_id)], ids, [], values)
    assert not store.finish_batch(ledger_engine, "batch_1", [_row(request_id)], ids, [], values)
    with ledger_engine.connect() as conn:
        n = conn.execute(text("SELECT count(*) FROM usage_records WHERE endpoint = 'batch'"))
        assert n.scalar_one() == 1
    assert store.ended_batches(ledger_engine, ["batch_1"]) == {"batch_1": D("0.5")}
    assert store.open_batches(ledger_engine) == []


def test_two_replicas_finishing_one_batch_at_once_write_its_rows_once(
    ledger_engine: Engine, clean_ledger: None
) -> None:
    store.add_batch(ledger_engine, _batch("batch_2"))
    request_id = uuid.uuid4()
    ids = [{"request_id": request_id, "batch_id": "batch_2", "custom_id": "c"}]

    def finish() -> bool:
        return store.finish_batch(ledger_engine, "batch_2", [_row(request_id)], ids, [],
                                  {"status": "completed"})

    with ThreadPoolExecutor(4) as pool:
        outcomes = list(pool.map(lambda _: finish(), range(4)))
    assert sorted(outcomes) == [False, False, False, True]
    with ledger_engine.connect() as conn:
        rows = conn.execute(text("SELECT count(*) FROM usage_records r JOIN batch_lines l "
                                 "USING (request_id) WHERE l.batch_id = 'batch_2'"))
        assert rows.scalar_one() == 1


def test_one_holder_at_a_time_has_the_poll_lease(ledger_engine: Engine, clean_ledger: None
                                                 ) -> None:
    assert store.take_lease(ledger_engine, "poll", "r1", 30)
    assert not store.take_lease(ledger_engine, "poll", "r2", 30)
    assert store.take_lease(ledger_engine, "poll", "r1", 30)  # renewed by its holder
    with ledger_engine.begin() as conn:
        conn.execute(text("UPDATE batch_leases SET expires_at = now() - interval '1 s'"))
    assert store.take_lease(ledger_engine, "poll", "r2", 30)  # lapsed: another takes it


def test_another_apps_batch_and_file_are_not_found(ledger_engine: Engine, clean_ledger: None
                                                   ) -> None:
    store.add_batch(ledger_engine, _batch())
    store.add_file(ledger_engine, {"id": "file-1", "app": "a", "purpose": "batch",
                                   "filename": "f", "bytes": 1})
    assert store.find_batch(ledger_engine, "batch_1", "b") is None
    assert store.find_batch(ledger_engine, "batch_1", "a") is not None
    assert store.find_file(ledger_engine, "file-1", "b") is None
    assert not store.delete_file(ledger_engine, "file-1", "b")
    assert store.list_batches(ledger_engine, "b", "openai", None, 10) == []
