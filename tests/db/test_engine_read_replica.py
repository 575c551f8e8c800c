"""DATABASE_READ_URL on a real streaming replica: the usage API and a dashboard page
answer from it and say how far behind the primary its data is, while it lags too.

The shared test server allows no replication connection (its pg_hba.conf has no
`replication` entry, and this test does not change a server others use), so the test
makes its own pair: a primary (initdb) and a replica (pg_basebackup -R of it), each on
its own port under a temporary directory, run as the postgres user with the Debian
binaries, stopped by PID at the end."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import streamlit as st
from sqlalchemy import text
from streamlit.testing.v1 import AppTest

from dashboard.components.session import USER_KEY
from db.engine import data_lag_s, make_engine
from db.migrate import upgrade
from gateway.ledger.database import LedgerDatabase
from gateway.replica.usage_api.route import LAG_HEADER
from tests.gateway.ledger.support import make_record
from tests.gateway.replica.usage_api.admin_client import admin_client

PG_BIN = Path("/usr/lib/postgresql/15/bin")
APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
NOW = dt.datetime.now(dt.UTC)


def _as_postgres(*cmd: object) -> None:
    subprocess.run(
        ["runuser", "-u", "postgres", "--", *map(str, cmd)],
        check=True,
        capture_output=True,
        timeout=180,
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(data: Path, port: int) -> int:
    options = f"-p {port} -k {data} -c listen_addresses=127.0.0.1 -c fsync=off"
    _as_postgres(PG_BIN / "pg_ctl", "-D", data, "-l", data / "server.log", "-w", "-t", "120",
                 "-o", options, "start")  # fmt: skip
    return int((data / "postmaster.pid").read_text().split()[0])


def _stop(pid: int) -> None:
    os.kill(pid, signal.SIGINT)  # PostgreSQL's fast shutdown
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)


def _wait(predicate: Callable[[], bool], what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[str, str]]:
    """(primary URL, replica URL) of a fresh streaming pair."""
    root = Path(tempfile.mkdtemp(prefix="costgate-issue29-replica-"))
    shutil.chown(root, "postgres", "postgres")
    primary, replica = root / "primary", root / "replica"
    pids: list[int] = []
    try:
        _as_postgres(PG_BIN / "initdb", "-D", primary, "-A", "trust", "-U", "postgres",
                     "--no-sync", "--no-instructions")  # fmt: skip
        p_port, r_port = _free_port(), _free_port()
        pids.append(_start(primary, p_port))
        _as_postgres(PG_BIN / "pg_basebackup", "-h", "127.0.0.1", "-p", p_port, "-U",
                     "postgres", "-D", replica, "-R", "-X", "stream", "-c", "fast",
                     "--no-sync")  # fmt: skip
        pids.append(_start(replica, r_port))
        yield (
            f"postgresql+psycopg://postgres@127.0.0.1:{p_port}/postgres",
            f"postgresql+psycopg://postgres@127.0.0.1:{r_port}/postgres",
        )
    finally:
        for pid in reversed(pids):
            _stop(pid)
        shutil.rmtree(root, ignore_errors=True)


def _write(url: str, n: int) -> None:
    async def go() -> None:
        db = LedgerDatabase(url, write_timeout_s=30, connect_timeout_s=5)
        try:
            rows = [
                make_record(
                    request_id=uuid.uuid4(),
                    started_at=NOW - dt.timedelta(minutes=i + 1),
                    ended_at=NOW - dt.timedelta(minutes=i),
                )
                for i in range(n)
            ]
            assert await db.write(rows) == []
        finally:
            await db.close()

    asyncio.run(go())


def _count(url: str) -> int:
    """The ledger's rows; -1 while the replica has not yet replayed the migrations (the
    replay of the schema can come after the writer's first rows are committed)."""
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            if conn.execute(text("SELECT to_regclass('usage_records')")).scalar_one() is None:
                return -1
            return int(conn.execute(text("SELECT count(*) FROM usage_records")).scalar_one())
    finally:
        engine.dispose()


def _lag(url: str) -> float | None:
    engine = make_engine(url)
    try:
        return data_lag_s(engine)
    finally:
        engine.dispose()


def _replay(url: str, paused: bool) -> None:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            fn = "pg_wal_replay_pause" if paused else "pg_wal_replay_resume"
            conn.execute(text(f"SELECT {fn}()"))
    finally:
        engine.dispose()


def _requests(get: Callable[..., object]) -> tuple[int, float]:
    r = get("usage/completions", start_time=int((NOW - dt.timedelta(days=1)).timestamp()))
    assert r.status_code == 200, r.text  # type: ignore[attr-defined]
    body = json.loads(r.text)  # type: ignore[attr-defined]
    n = sum(x["num_model_requests"] for b in body["data"] for x in b["results"])
    return n, float(r.headers[LAG_HEADER])  # type: ignore[attr-defined]


def _overview(
    primary: str, replica: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[str, str]:
    """(what the Overview says about its data, the requests it shows)."""
    from dashboard.settings import load_settings
    from tests.dashboard.pages.test_pages import USERS, USERS_ENV, signed_in

    monkeypatch.setenv("DATABASE_URL", primary)
    monkeypatch.setenv("DATABASE_READ_URL", replica)
    monkeypatch.setenv(USERS_ENV, USERS)
    load_settings.cache_clear()
    st.cache_data.clear()
    st.cache_resource.clear()
    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state[USER_KEY] = signed_in("admin")
    at.run()
    assert not at.exception, at.exception
    notes = [c.value for c in at.caption if "replica" in c.value]
    requests = {m.label: m.value for m in at.metric}["Requests"]
    load_settings.cache_clear()
    return (notes[0] if notes else ""), requests


def test_the_usage_api_and_a_page_read_the_replica_and_say_how_far_behind_it_is(
    pair: tuple[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    primary, replica = pair
    monkeypatch.setenv("COSTGATE_STATE_DIR", str(tmp_path))
    upgrade(primary)
    _write(primary, 40)  # the writer writes the primary
    _wait(lambda: _count(replica) == 40, "the replica to replay the rows")
    assert _lag(primary) is None and _lag(replica) == 0

    with admin_client(primary, read_url=replica) as get:
        assert _requests(get) == (40, 0.0)
        assert _overview(primary, replica, monkeypatch) == (
            "Data from a read replica, up to date.",
            "40",
        )
        # the replica stops replaying: the primary moves on, the replica's answers do not,
        # and they say how far behind they are
        _replay(replica, paused=True)
        _write(primary, 25)
        _wait(lambda: (_lag(replica) or 0) >= 1.0, "the replica to fall a second behind")
        n, lag = _requests(get)
        assert n == 40 and lag >= 1.0
        assert _count(primary) == 65
        caption, shown = _overview(primary, replica, monkeypatch)
        assert shown == "40"  # the replica's data, not the primary's 65
        assert caption.startswith("Data from a read replica,") and "behind" in caption
        _replay(replica, paused=False)
        _wait(lambda: _count(replica) == 65, "the replica to catch up")
        assert _requests(get) == (65, 0.0)
