"""The ledger's promises, checked through the deployed gateway: every request has exactly
one row, priced as the price table says, through a database outage and a shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import os
import signal
import threading
import time
import uuid
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, text

from db.analytics.rollups import drop_weeks_before
from db.keys import create_key
from db.partitions.sql import week_name
from tests.fixtures.ledger_writes import write_records
from tests.fixtures.metric_records import make_record

pytestmark = pytest.mark.ray

MESSAGES = [{"role": "user", "content": "Summarise the quarterly report in three bullets."}]
MODELS = ("gpt-4.1", "relay-gpt-4.1", "deepseek-v3.2", "relay-deepseek-v3.2", "auto", "code")


def _rows(gateway: Any, ids: list[str]) -> dict[str, dict[str, Any]]:
    engine = create_engine(gateway.database_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                text("SELECT * FROM usage_records WHERE request_id = ANY(CAST(:ids AS uuid[]))"),
                {"ids": ids},
            ).mappings().all()
    finally:
        engine.dispose()
    return {str(r["request_id"]): dict(r) for r in rows}


def wait_rows(gateway: Any, ids: list[str], timeout: float = 60.0) -> dict[str, dict[str, Any]]:
    deadline = time.monotonic() + timeout
    rows: dict[str, dict[str, Any]] = {}
    while time.monotonic() < deadline:
        rows = _rows(gateway, ids)
        if len(rows) >= len(ids):
            return rows
        time.sleep(0.5)
    return rows


def expected_costs(cfg: Any, model_name: str, usage: dict[str, Any]) -> tuple[Decimal, Decimal]:
    """(list cost USD, actual cost USD) by hand from the config's price table."""
    model = cfg.model(model_name)
    provider = cfg.provider(model.provider)
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    prompt, completion = usage["prompt_tokens"], usage["completion_tokens"]
    mtok = Decimal(1_000_000)

    def cost(p: Any) -> Decimal:
        cached_rate = p.cached_input if p.cached_input is not None else p.input
        return ((prompt - cached) * p.input + cached * cached_rate + completion * p.output) / mtok

    list_usd = cost(model.list_prices)
    billing = provider.billing
    own = billing.price_table.get(model.upstream_model)
    billed = cost(own) if own is not None else cost(model.list_prices) * billing.multiplier
    q = Decimal("1e-10")
    return (
        list_usd.quantize(q, ROUND_HALF_EVEN),
        (billed / billing.fx_per_usd).quantize(q, ROUND_HALF_EVEN),
    )


async def _one(client: httpx.AsyncClient, key: str, model: str, stream: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "messages": MESSAGES, "max_tokens": 40}
    headers = {"authorization": f"Bearer {key}"}
    if not stream:
        r = await client.post("/v1/chat/completions", json=body, headers=headers)
        return {"status": r.status_code, "id": r.headers.get("x-costgate-request-id"),
                "model": r.headers.get("x-costgate-model"), "usage": r.json().get("usage")}
    body |= {"stream": True, "stream_options": {"include_usage": True}}
    usage = None
    async with client.stream("POST", "/v1/chat/completions", json=body, headers=headers) as r:
        async for line in r.aiter_lines():
            if line.startswith("data: {"):
                chunk = json.loads(line[6:])
                usage = chunk.get("usage") or usage
        return {"status": r.status_code, "id": r.headers.get("x-costgate-request-id"),
                "model": r.headers.get("x-costgate-model"), "usage": usage}


def test_500_concurrent_requests_leave_500_rows_priced_by_the_table(gateway, sim):
    keys = [create_key(gateway.database_url, f"ledger-app-{i}", "ledger")[0] for i in range(3)]

    async def run() -> list[dict[str, Any]]:
        limits = httpx.Limits(max_connections=500, max_keepalive_connections=500)
        async with httpx.AsyncClient(base_url=gateway.base_url, timeout=120,
                                     limits=limits) as client:
            return await asyncio.gather(*(
                _one(client, keys[i % 3], MODELS[i % len(MODELS)], stream=i % 2 == 1)
                for i in range(500)
            ))

    results = asyncio.run(run())
    assert [r["status"] for r in results] == [200] * 500
    ids = [r["id"] for r in results]
    assert len(set(ids)) == 500
    rows = wait_rows(gateway, ids)
    assert len(rows) == 500
    for result in results:
        row = rows[result["id"]]
        usage = result["usage"]
        assert row["model"] == result["model"]
        assert row["app"].startswith("ledger-app-") and row["team"] == "ledger"
        assert row["usage_source"] == "provider"
        assert row["prompt_tokens"] == usage["prompt_tokens"]
        assert row["completion_tokens"] == usage["completion_tokens"]
        list_usd, actual_usd = expected_costs(gateway.cfg, row["model"], usage)
        assert row["list_cost_usd"] == list_usd, row
        assert row["actual_cost_usd"] == actual_usd, row


def _load(gateway: Any, seconds: float, results: list[dict[str, Any]], concurrency: int) -> None:
    """Bounded load from a thread: at most `seconds`, at most 5,000 requests."""

    async def worker(client: httpx.AsyncClient, deadline: float, n: int) -> None:
        i = 0
        while time.monotonic() < deadline and len(results) < 5000:
            i += 1
            try:
                results.append(await _one(client, gateway.api_key,
                                          MODELS[(n + i) % len(MODELS)], stream=(n + i) % 3 == 0))
            except httpx.HTTPError as err:  # a gateway going down: counted, not raised
                results.append({"status": 0, "id": None, "error": type(err).__name__})

    async def run() -> None:
        deadline = time.monotonic() + seconds
        async with httpx.AsyncClient(base_url=gateway.base_url, timeout=60) as client:
            await asyncio.gather(*(worker(client, deadline, n) for n in range(concurrency)))

    asyncio.run(run())


def test_database_outage_of_30_s_loses_no_row_and_fails_no_request(gateway, sim):
    results: list[dict[str, Any]] = []
    load = threading.Thread(target=_load, args=(gateway, 42.0, results, 6))
    load.start()
    time.sleep(3)
    gateway.db_proxy.block()
    blocked_at = len(results)
    time.sleep(32)
    during = len(results) - blocked_at
    gateway.db_proxy.unblock()
    load.join(60)
    assert not load.is_alive()
    assert during > 50  # requests kept flowing while the database was away
    assert all(r["status"] == 200 for r in results), [r for r in results if r["status"] != 200]
    ids = [r["id"] for r in results]
    rows = wait_rows(gateway, ids, timeout=90)
    assert set(rows) == set(ids)
    engine = create_engine(gateway.database_url)
    with engine.connect() as conn:
        dupes = conn.execute(text(
            "SELECT count(*) - count(DISTINCT request_id) FROM usage_records")).scalar()
    engine.dispose()
    assert dupes == 0


def test_dropping_old_weeks_while_the_gateway_writes_loses_no_row(gateway, sim):
    """Retention drops whole weeks (an ACCESS EXCLUSIVE lock on the ledger for each DROP)
    while the replicas' writers write: every answered request still has its row, and the
    rollups keep the dropped weeks' totals."""
    engine = create_engine(gateway.database_url)
    # two weeks long before any other test's rows, each a partition of its own
    today = dt.datetime.now(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    monday = today - dt.timedelta(days=today.weekday() + 7 * 52 * 3)
    weeks = [monday, monday + dt.timedelta(days=7)]
    app = f"drop-history-{uuid.uuid4().hex[:8]}"
    with engine.begin() as conn:
        for start in weeks:
            end = start + dt.timedelta(days=7)  # DDL takes no parameters: our own instants
            conn.execute(text(f"CREATE TABLE {week_name(start.date())} PARTITION OF usage_records"
                              f" FOR VALUES FROM ('{start.isoformat()}') TO ('{end.isoformat()}')"))
        pruned_before = conn.execute(text("SELECT pruned_before FROM usage_rollup_state")).scalar()
    history = [make_record(app=app, started_at=monday + dt.timedelta(hours=5 * i),
                           ended_at=monday + dt.timedelta(hours=5 * i, seconds=1))
               for i in range(60)]  # fmt: skip
    write_records(gateway.database_url, history)
    results: list[dict[str, Any]] = []
    load = threading.Thread(target=_load, args=(gateway, 10.0, results, 8))
    load.start()
    try:
        deadline = time.monotonic() + 30
        while len(results) < 40 and time.monotonic() < deadline:  # the writers are busy
            time.sleep(0.05)
        dropped, rows = drop_weeks_before(engine, weeks[-1] + dt.timedelta(days=7))
        during = len(results)
    finally:
        load.join(90)
        with engine.begin() as conn:  # the retention horizon as other tests knew it
            conn.execute(text("UPDATE usage_rollup_state SET pruned_before = :p"),
                         {"p": pruned_before})
    assert not load.is_alive()
    assert dropped == [week_name(w.date()) for w in weeks] and rows == len(history)
    assert len(results) > during  # requests went on after the drops
    assert all(r["status"] == 200 for r in results), [r for r in results if r["status"] != 200]
    ids = [r["id"] for r in results]
    assert set(wait_rows(gateway, ids)) == set(ids)
    with engine.connect() as conn:
        raw = conn.execute(text("SELECT count(*) FROM usage_records WHERE app = :a"), {"a": app})
        kept = conn.execute(text("SELECT sum(requests) FROM usage_rollup_daily WHERE app = :a"),
                            {"a": app})
        assert (raw.scalar(), kept.scalar()) == (0, len(history))
    engine.dispose()


def _spooled(spool: Path, ids: set[str]) -> dict[str, Path]:
    """The spool file holding each of `ids`, read as any other process would read it."""
    found: dict[str, Path] = {}
    for path in spool.glob("usage-*.jsonl"):
        if not path.name.startswith(("usage-spool-", "usage-replay-")):
            continue
        try:
            lines = path.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            continue  # claimed (renamed) while we looked
        for line in lines:
            with contextlib.suppress(ValueError, KeyError, TypeError):
                if (rid := json.loads(line)["request_id"]) in ids:
                    found[rid] = path
    return found


def _holder(path: Path) -> int | None:
    """The PID in the file's name, if that process has the file open (and so its lock):
    never a PID from a name alone, which may belong to anything by now."""
    pid = int(path.name.split("-")[2])
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{pid}/fd/{fd}") == str(path):
                    return pid
    return None


def _holders(gateway: Any, ids: set[str]) -> dict[str, int | None]:
    return {rid: _holder(path) for rid, path in _spooled(gateway.state_dir / "spool", ids).items()}


def test_rows_spooled_in_an_outage_survive_a_sigkill_and_the_next_replica_replays_them(
    gateway, sim
):
    async def burst() -> list[dict[str, Any]]:
        async with httpx.AsyncClient(base_url=gateway.base_url, timeout=60) as client:
            return await asyncio.gather(*(
                _one(client, gateway.api_key, MODELS[i % len(MODELS)], stream=i % 2 == 1)
                for i in range(40)
            ))

    gateway.db_proxy.block()
    try:
        results = asyncio.run(burst())
        assert [r["status"] for r in results] == [200] * 40
        ids = {r["id"] for r in results}
        # on disk within about a flush interval, held by the replicas that served them
        deadline = time.monotonic() + 15
        while len(holders := _holders(gateway, ids)) < len(ids) or None in holders.values():
            assert time.monotonic() < deadline, f"{len(holders)} of {len(ids)} rows on disk"
            time.sleep(0.2)
        killed = set(holders.values())
        for pid in killed:
            assert pid is not None
            os.kill(pid, signal.SIGKILL)  # no __del__, no flush: what the OOM killer does
        # their replacements adopt the files (the kernel dropped the dead ones' locks),
        # still during the outage: nothing but the disk carried these rows across
        deadline = time.monotonic() + 120
        while True:
            holders = _holders(gateway, ids)
            heirs = set(holders.values())
            if len(holders) == len(ids) and None not in heirs and not heirs & killed:
                break
            assert time.monotonic() < deadline, f"not adopted: {holders}"
            time.sleep(0.5)
        assert not _rows(gateway, sorted(ids))  # the database has seen none of them yet
    finally:
        gateway.db_proxy.unblock()
    rows = wait_rows(gateway, sorted(ids), timeout=120)
    assert set(rows) == ids
    engine = create_engine(gateway.database_url)
    with engine.connect() as conn:
        n = conn.execute(
            text("SELECT count(*) FROM usage_records WHERE request_id = ANY(CAST(:ids AS uuid[]))"),
            {"ids": sorted(ids)},
        ).scalar()
    engine.dispose()
    assert n == len(ids)  # once each
    _wait_serving(gateway)


def _wait_serving(gateway: Any, timeout: float = 120.0) -> None:
    """Until the gateway answers again in a row: the session's next tests need it."""
    deadline, ok = time.monotonic() + timeout, 0
    while ok < 5:
        assert time.monotonic() < deadline, "the gateway did not come back"
        try:
            r = httpx.post(gateway.base_url + "/v1/chat/completions", timeout=30,
                           headers={"authorization": f"Bearer {gateway.api_key}"},
                           json={"model": "fast", "messages": MESSAGES})
            ok = ok + 1 if r.status_code == 200 else 0
        except httpx.HTTPError:
            ok = 0
        time.sleep(0.2)


def test_costgate_down_during_load_keeps_every_completed_requests_row(gateway, sim):
    results: list[dict[str, Any]] = []
    load = threading.Thread(target=_load, args=(gateway, 12.0, results, 6))
    load.start()
    time.sleep(4)
    down = gateway.run_cli("down")
    assert down.returncode == 0, down.stderr
    load.join(60)
    try:
        completed = [r["id"] for r in results if r["status"] == 200 and r["id"]]
        assert len(completed) > 20
        rows = wait_rows(gateway, completed, timeout=10)
        assert set(completed) <= set(rows), set(completed) - set(rows)
    finally:
        # the rest of the session needs its gateway back
        up = gateway.run_cli("up")
        assert up.returncode == 0, up.stderr


def test_request_ids_are_uuids(gateway, sim):
    r = httpx.post(gateway.base_url + "/v1/chat/completions",
                   headers={"authorization": f"Bearer {gateway.api_key}"},
                   json={"model": "fast", "messages": MESSAGES})
    uuid.UUID(r.headers["x-costgate-request-id"])
