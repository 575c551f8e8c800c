"""The spool through a writer against a real PostgreSQL (through a proxy we cut, stall and
restore) and real file systems: rows reach the disk promptly during an outage, survive
their writer, come back once, and a spool that cannot be written, a line that is not a
record or a file that cannot be read cost no row the writer could keep."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from gateway.ledger import spool as spool_module
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

pytestmark = pytest.mark.usefixtures("clean_ledger")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real file system of 256 KiB (a tmpfs), to fill up."""
    mount = tmp_path / "small-disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(directory: Path) -> Path:
    filler = directory / "filler"
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError as err:
            assert err.errno == errno.ENOSPC
    return filler


# -- an outage ----------------------------------------------------------------------------


@pytest.mark.parametrize("outage", ["refused", "hung"])
async def test_during_an_outage_rows_reach_the_spool_within_about_one_flush_interval(
    database_proxy: DatabaseProxy,
    ledger_engine: Engine,
    writer_factory: Callable[..., RecordWriter],
    tmp_path: Path,
    outage: str,
) -> None:
    interval, spool_dir = 0.2, tmp_path / "spool"
    # a hung write fails only after its timeout: what reaches the disk before that does
    # so because the write is slow, not because it failed
    w = writer_factory(
        database_proxy.url,
        spool_dir=spool_dir,
        flush_interval_s=interval,
        write_timeout_s=20,
    )
    await w.start()
    w.submit(make_record())
    await wait_until(lambda: w.stats()["written"] == 1)  # connected

    if outage == "refused":
        database_proxy.block()
    else:
        database_proxy.stall()
        w.submit(make_record())  # the write that hangs
        await asyncio.sleep(interval * 1.5)
    spooled_before = w.stats()["spooled"]
    started = time.monotonic()
    for _ in range(300):
        w.submit(make_record())
    await wait_until(lambda: w.stats()["spooled"] - spooled_before == 300, timeout_s=10)
    elapsed = time.monotonic() - started
    # the memory bound (20,000 by default) is far away: time moved them, not memory
    assert spool_lines(spool_dir) >= 300 and elapsed < 5 * interval, elapsed
    print(f"{outage}: 300 rows on disk {elapsed * 1000:.0f} ms after submit")

    database_proxy.unblock()
    expected = 302 if outage == "hung" else 301
    await wait_until(lambda: row_count(ledger_engine) == expected, timeout_s=60)
    assert distinct_ids(ledger_engine) == expected


async def test_spooled_rows_are_replayed_once_and_their_files_removed(
    database_proxy: DatabaseProxy,
    ledger_engine: Engine,
    writer_factory: Callable[..., RecordWriter],
    tmp_path: Path,
) -> None:
    spool_dir = tmp_path / "spool"
    database_proxy.block()
    w = writer_factory(database_proxy.url, batch_size=50, spool_dir=spool_dir)
    await w.start()  # starting while the database is away is fine
    for i in range(350):
        w.submit(make_record())
        if i % 50 == 49:
            await asyncio.sleep(0.02)
    await wait_until(lambda: w.stats()["spooled"] == 350)
    assert w.stats()["spool_depth"] == 350 and spool_lines(spool_dir) == 350

    database_proxy.unblock()
    await wait_until(lambda: w.stats()["written"] == 350)
    assert row_count(ledger_engine) == 350 == distinct_ids(ledger_engine)
    s = w.stats()
    assert (s["replayed"], s["spool_depth"], s["buffer_depth"], s["dropped"]) == (350, 0, 0, 0)
    assert not list(spool_dir.glob("usage-*.jsonl"))  # replayed, removed


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
    started = time.monotonic()
    await first.close(timeout_s=5)
    # everything was on disk well before the timeout: close does not wait it out
    assert time.monotonic() - started < 3
    assert first.stats()["spooled"] == 60 and spool_lines(spool_dir) == 60
    first.submit(make_record())  # a late record after close: spooled, never raised
    assert first.stats()["spooled"] == 61 and spool_lines(spool_dir) == 61

    second = writer_factory(database_url, spool_dir=spool_dir)
    await second.start()
    assert second.stats()["adopted"] == 61
    await wait_until(lambda: second.stats()["replayed"] == 61)
    assert row_count(ledger_engine) == 61


# -- lines and files that are not what they should be ------------------------------------


async def test_a_malformed_line_is_quarantined_and_the_rest_of_its_file_replayed(
    database_url: str,
    ledger_engine: Engine,
    writer_factory: Callable[..., RecordWriter],
    tmp_path: Path,
) -> None:
    spool_dir = tmp_path / "spool"
    spool_dir.mkdir()
    good = [make_record() for _ in range(4)]
    bad_cost = json.dumps({**json.loads(good[0].to_json()), "actual_cost": "1e"})
    lines = [
        good[0].to_json(),
        bad_cost,  # decimal.InvalidOperation: once uncaught, it stopped the writer
        "{not json}",
        good[1].to_json(),
        good[2].to_json(),
    ]
    torn = good[3].to_json()[:40]  # a crash mid-append
    orphan = spool_dir / f"usage-spool-{await dead_pid()}-deadbeef0000.jsonl"
    orphan.write_text("".join(line + "\n" for line in lines) + torn)

    w = writer_factory(database_url, spool_dir=spool_dir)
    await w.start()
    assert w.stats()["adopted"] == 6
    await wait_until(lambda: w.stats()["spool_depth"] == 0 and w.stats()["replayed"] == 3)
    s = w.stats()
    assert (s["replayed"], s["quarantined"], s["dropped"], s["restarts"]) == (3, 3, 0, 0)
    assert row_count(ledger_engine) == 3

    (quarantine,) = spool_dir.glob("usage-quarantine-*.jsonl")
    kept = [json.loads(line) for line in quarantine.read_text().splitlines()]
    assert [k["line"] for k in kept] == [bad_cost + "\n", "{not json}\n", torn]
    assert kept[0]["reason"].startswith("InvalidOperation")
    assert kept[0]["offset"] == len(lines[0]) + 1

    w.submit(make_record())  # and the writer writes on
    await wait_until(lambda: row_count(ledger_engine) == 4)
    assert w.health().alive


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


async def test_files_that_cannot_be_read_are_set_aside_and_the_writer_goes_on(
    database_proxy: DatabaseProxy,
    ledger_engine: Engine,
    writer_factory: Callable[..., RecordWriter],
    tmp_path: Path,
) -> None:
    spool_dir = tmp_path / "spool"
    spool_dir.mkdir()
    # a directory under a spool file's name: it cannot even be opened as a file
    (spool_dir / "usage-spool-1-0000000000aa.jsonl").mkdir()
    database_proxy.block()
    w = writer_factory(database_proxy.url, spool_dir=spool_dir)
    await w.start()
    for _ in range(20):
        w.submit(make_record())
    await wait_until(lambda: w.stats()["flush_errors"] >= 2)  # replay tried, and failed
    (replay,) = spool_dir.glob("usage-replay-*.jsonl")
    # the claimed file turns into something that cannot be read (an I/O error stands
    # for many): tried a few times, then set aside whole, counted as quarantined
    replay.unlink()
    replay.mkdir()
    database_proxy.unblock()
    await wait_until(lambda: w.stats()["quarantined"] == 20)
    assert list(spool_dir.glob("usage-quarantine-file-usage-replay-*.jsonl"))
    w.submit(make_record())
    await wait_until(lambda: row_count(ledger_engine) == 1)
    s = w.stats()
    assert (s["spool_depth"], s["restarts"], s["dropped"]) == (0, 0, 0) and w.health().alive


# -- a spool that cannot be written -------------------------------------------------------


async def test_a_spool_directory_that_cannot_be_created_keeps_rows_in_memory_counted(
    database_proxy: DatabaseProxy,
    ledger_engine: Engine,
    writer_factory: Callable[..., RecordWriter],
    tmp_path: Path,
) -> None:
    (tmp_path / "state").write_text("a file where the spool's parent should be")
    w = writer_factory(database_proxy.url, spool_dir=tmp_path / "state" / "spool")
    await w.start()
    health = w.health()
    assert health.alive and not health.ready and not health.spool_writable
    (problem,) = health.problems
    assert problem.startswith("spool not writable: NotADirectoryError")

    database_proxy.block()
    for _ in range(40):
        w.submit(make_record())
    await wait_until(lambda: w.stats()["spool_write_errors"] >= 2)
    s = w.stats()
    assert (s["buffer_depth"], s["spooled"], s["dropped"]) == (40, 0, 0)

    database_proxy.unblock()
    # the writer lets go of a batch after its commit: the rows are in the table a moment
    # before they leave the buffer (seen on a loaded machine), so wait for both
    await wait_until(
        lambda: row_count(ledger_engine) == 40 and w.stats()["buffer_depth"] == 0
    )
    assert not w.health().ready  # still no spool


async def test_a_full_disk_keeps_rows_in_memory_up_to_the_bound_then_spools_once_freed(
    small_disk: Path,
    database_proxy: DatabaseProxy,
    ledger_engine: Engine,
    writer_factory: Callable[..., RecordWriter],
) -> None:
    spool_dir = small_disk / "spool"
    w = writer_factory(database_proxy.url, spool_dir=spool_dir, batch_size=10, max_buffer=100)
    await w.start()
    assert w.health().ready
    filler = _fill(small_disk)

    database_proxy.block()
    for i in range(130):
        w.submit(make_record())
        if i % 10 == 9:
            await asyncio.sleep(0.02)
    await wait_until(lambda: w.stats()["spool_write_errors"] >= 2)
    s = w.stats()
    # what memory may hold stays there; beyond the bound, each drop is counted
    assert (s["buffer_depth"], s["spooled"], s["dropped"]) == (100, 0, 30)
    health = w.health()
    assert health.alive and not health.ready
    assert "No space left on device" in health.problems[0]

    filler.unlink()
    await wait_until(lambda: w.stats()["spooled"] == 100)
    assert spool_lines(spool_dir) == 100 and w.health().ready

    database_proxy.unblock()
    await wait_until(lambda: w.stats()["written"] == 100 and w.stats()["spool_depth"] == 0)
    assert row_count(ledger_engine) == 100
    s = w.stats()
    assert s["queued"] == 130 == s["written"] + s["dropped"] and s["replayed"] == 100


async def test_at_close_rows_with_nowhere_to_go_wait_for_the_database_or_the_disk(
    small_disk: Path,
    database_proxy: DatabaseProxy,
    ledger_engine: Engine,
    writer_factory: Callable[..., RecordWriter],
) -> None:
    """An outage and a full disk at shutdown: rows of answered requests are tried on both
    until one takes them, within `stranded_s`; only past it are they lost, counted."""
    w = writer_factory(database_proxy.url, spool_dir=small_disk / "spool", batch_size=10)
    await w.start()
    filler = _fill(small_disk)
    database_proxy.block()
    for _ in range(25):
        w.submit(make_record())
    await wait_until(lambda: w.stats()["spool_write_errors"] >= 1)

    async def database_back_later() -> None:
        await asyncio.sleep(2.0)
        database_proxy.unblock()

    back = asyncio.create_task(database_back_later())
    await w.close(timeout_s=1.0, stranded_s=30.0)
    await back
    s = w.stats()
    assert (s["written"], s["dropped"], s["buffer_depth"]) == (25, 0, 0)
    assert row_count(ledger_engine) == 25

    # the same, and nothing comes back in time: lost, and counted as such
    w2 = writer_factory(database_proxy.url, spool_dir=small_disk / "spool", batch_size=10)
    await w2.start()
    database_proxy.block()
    for _ in range(5):
        w2.submit(make_record())
    await w2.close(timeout_s=0.5, stranded_s=1.5)
    s = w2.stats()
    assert (s["written"], s["dropped"], s["spooled"]) == (0, 5, 0)
    filler.unlink()
    database_proxy.unblock()


async def test_a_torn_append_on_a_full_disk_gives_its_space_back(small_disk: Path) -> None:
    spool = spool_module.Spool(small_disk / "spool")
    spool.open()
    spool.append([make_record()])  # the file exists and holds one row
    (own,) = list((small_disk / "spool").glob("usage-spool-*.jsonl"))
    kept = own.stat().st_size
    filler = _fill(small_disk)
    filler.unlink()
    # room for part of a batch only: the append fails half-written
    _fill_leaving(small_disk, free=8192)
    with pytest.raises(OSError):
        spool.append([make_record() for _ in range(200)])
    (replay,) = list((small_disk / "spool").glob("usage-replay-*.jsonl"))
    assert replay.stat().st_size == kept  # the torn tail is gone, its space is free
    spool.close()


def _fill_leaving(directory: Path, free: int) -> None:
    st = os.statvfs(directory)
    room = st.f_bavail * st.f_frsize - free
    with open(directory / "filler-2", "wb", buffering=0) as f:
        f.write(b"\0" * max(0, room))
