"""The spool: the file protocol on its own (no database), then through a writer against a
real PostgreSQL: what overflows memory or outlives a writer is replayed, once, from disk."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from gateway.ledger import spool as spool_module
from gateway.ledger.spool import Spool, read_batch
from gateway.ledger.writer import RecordWriter
from tests.fixtures.database import DatabaseProxy
from tests.gateway.ledger.support import (
    dead_pid,
    distinct_ids,
    make_record,
    row_count,
    spool_lines,
    wait_until,
)

# the tests that go through a writer and count rows in usage_records
needs_ledger = pytest.mark.usefixtures("clean_ledger")


@pytest.fixture
def spools(tmp_path: Path) -> Iterator[Callable[[], Spool]]:
    """Spools on one directory, each released afterwards: a live token would outlive the test."""
    made: list[Spool] = []

    def make() -> Spool:
        s = Spool(tmp_path / "spool")
        made.append(s)
        return s

    yield make
    for s in made:
        s.close_file()
        s.release()


# -- the file protocol --------------------------------------------------------------------


def test_a_batch_resumes_where_the_last_one_ended_and_skips_corrupt_and_torn_lines(
    tmp_path: Path,
) -> None:
    good = [make_record() for _ in range(3)]
    path = tmp_path / "usage-replay-1-abc-0.jsonl"
    lines = [good[0].to_json(), good[1].to_json(), "", "{not json}", good[2].to_json()]
    # the last line torn: a crash mid-append
    path.write_text("".join(line + "\n" for line in lines) + good[0].to_json()[:40])
    records, offset, corrupt = read_batch(path, 0, 2)
    assert [r.request_id for r in records] == [r.request_id for r in good[:2]] and corrupt == 0
    records, offset, corrupt = read_batch(path, offset, 10)
    assert [r.request_id for r in records] == [good[2].request_id] and corrupt == 2
    assert offset == path.stat().st_size
    assert read_batch(path, offset, 10) == ([], offset, 0)


def test_a_live_writers_file_is_left_alone_and_adopted_once_it_is_released(
    spools: Callable[[], Spool],
) -> None:
    owner = spools()
    owner.open()
    records = [make_record() for _ in range(2)]
    owner.append(records, flush=True)

    bystander = spools()
    bystander.open()
    assert bystander.adopted == 0 and bystander.next_replay() is None

    owner.close_file()
    owner.release()
    heir = spools()
    heir.open()
    assert heir.adopted == 2 and heir.depth == 2
    replay = heir.next_replay()
    assert replay is not None
    assert replay.path.name.startswith(f"usage-replay-{os.getpid()}-{heir.token}-")

    batch, end, corrupt = read_batch(replay.path, replay.offset, 10)
    assert [r.request_id for r in batch] == [r.request_id for r in records] and corrupt == 0
    heir.advance(replay, end, len(batch))
    assert heir.depth == 0 and heir.next_replay() is replay  # not at its end yet
    batch, end, corrupt = read_batch(replay.path, replay.offset, 10)
    heir.advance(replay, end, len(batch) + corrupt)
    assert not replay.path.exists() and heir.next_replay() is None


def test_the_own_file_is_rotated_for_replay_and_appends_start_a_fresh_one(
    spools: Callable[[], Spool],
) -> None:
    s = spools()
    s.open()
    s.append([make_record() for _ in range(3)], flush=True)
    replay = s.next_replay()
    assert replay is not None and replay.lines == 3 and s.adopted == 0
    s.append([make_record()], flush=True)
    assert s.depth == 4 and spool_lines(s.directory) == 4
    assert len(list(s.directory.glob("usage-spool-*.jsonl"))) == 1


# -- through a writer ---------------------------------------------------------------------


@needs_ledger
async def test_past_the_memory_bound_rows_spool_to_disk_and_replay_when_the_database_returns(
    database_proxy: DatabaseProxy,
    ledger_engine: Engine,
    writer_factory: Callable[..., RecordWriter],
    tmp_path: Path,
) -> None:
    spool_dir = tmp_path / "spool"
    database_proxy.block()
    w = writer_factory(database_proxy.url, batch_size=50, max_buffer=100, spool_dir=spool_dir)
    await w.start()  # starting while the database is away is fine
    for _ in range(350):
        w.submit(make_record())
    s = w.stats()
    assert (s["queued"], s["buffer_depth"], s["spooled"], s["spool_depth"]) == (350, 100, 250, 250)
    await wait_until(lambda: spool_lines(spool_dir) == 250)  # on disk, not only in a buffer

    database_proxy.unblock()
    await wait_until(lambda: w.stats()["written"] == 350)
    assert row_count(ledger_engine) == 350 == distinct_ids(ledger_engine)
    s = w.stats()
    assert (s["replayed"], s["spool_depth"], s["buffer_depth"], s["dropped"]) == (250, 0, 0, 0)
    await wait_until(lambda: not list(spool_dir.glob("usage-*.jsonl")))  # replayed, removed


@needs_ledger
async def test_close_while_the_database_is_away_spools_and_the_next_writer_replays(
    database_proxy: DatabaseProxy,
    database_url: str,
    ledger_engine: Engine,
    writer_factory: Callable[..., RecordWriter],
    tmp_path: Path,
) -> None:
    spool_dir = tmp_path / "spool"
    database_proxy.block()
    first = writer_factory(database_proxy.url, spool_dir=spool_dir)
    await first.start()
    for _ in range(60):
        first.submit(make_record())
    await first.close(timeout_s=0.5)
    assert first.stats()["spooled"] == 60 and spool_lines(spool_dir) == 60
    first.submit(make_record())  # a late record after close: spooled, never raised
    assert first.stats()["spooled"] == 61

    second = writer_factory(database_url, spool_dir=spool_dir)
    await second.start()
    assert second.stats()["adopted"] == 61
    await wait_until(lambda: second.stats()["replayed"] == 61)
    assert row_count(ledger_engine) == 61


@needs_ledger
async def test_spool_left_by_a_dead_process_is_replayed_and_its_corrupt_lines_counted(
    database_url: str,
    ledger_engine: Engine,
    writer_factory: Callable[..., RecordWriter],
    tmp_path: Path,
) -> None:
    pid = await dead_pid()
    spool_dir = tmp_path / "spool"
    spool_dir.mkdir()
    good = [make_record() for _ in range(3)]
    lines = [r.to_json() + "\n" for r in good] + ["{not json}\n", good[0].to_json()[:40]]
    (spool_dir / f"usage-spool-{pid}-deadbeef0000.jsonl").write_text("".join(lines))

    w = writer_factory(database_url, spool_dir=spool_dir)
    await w.start()
    assert w.stats()["adopted"] == 5
    await wait_until(lambda: w.stats()["spool_depth"] == 0)
    s = w.stats()
    assert (s["replayed"], s["dropped"]) == (3, 2)
    assert row_count(ledger_engine) == 3


@needs_ledger
async def test_a_running_writer_adopts_the_spool_of_a_sibling_that_died_later(
    database_url: str,
    ledger_engine: Engine,
    writer_factory: Callable[..., RecordWriter],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(spool_module, "ORPHAN_SCAN_INTERVAL_S", 0.2)
    spool_dir = tmp_path / "spool"
    w = writer_factory(database_url, spool_dir=spool_dir)
    await w.start()
    orphan = spool_dir / f"usage-spool-{await dead_pid()}-cafe00000000.jsonl"
    orphan.write_text("".join(make_record().to_json() + "\n" for _ in range(4)))
    await wait_until(lambda: w.stats()["replayed"] == 4)
    assert row_count(ledger_engine) == 4 and not orphan.exists()
