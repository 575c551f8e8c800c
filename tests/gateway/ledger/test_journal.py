"""The journal: a writer killed with rows still in memory loses none of them.

A real writer runs in a child process with the database healthy but its flush far away
(rows sit in memory, as in the flush interval before any SIGKILL), is killed with
SIGKILL, and the next writer on the same spool directory replays its journal into
PostgreSQL. And a writer that runs on deletes its journal segments as their rows reach
the database, so the journal stays one small file.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from gateway.ledger.journal import Journal
from gateway.ledger.spool import JOURNAL_DIR
from tests.gateway.ledger.support import distinct_ids, make_record, row_count, wait_until

CHILD = r"""
import asyncio, json, sys
from gateway.ledger.writer import RecordWriter
from tests.gateway.ledger.support import make_record

async def main(url, spool, n):
    # the database is up; the flush is an hour away: every row stays in memory
    w = RecordWriter(url, spool_dir=spool, flush_interval_s=3600, batch_size=10_000)
    await w.start()
    ids = []
    for _ in range(n):
        r = make_record()
        w.submit(r)
        ids.append(str(r.request_id))
    print(json.dumps({"ids": ids, "stats": w.stats()}), flush=True)
    await asyncio.sleep(3600)

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


async def test_rows_of_a_writer_killed_before_its_flush_are_replayed_from_its_journal(
    database_url: str, ledger_engine: Engine, clean_ledger: None, tmp_path: Path,
    writer_factory: Any,
) -> None:
    spool = tmp_path / "spool"
    root = Path(__file__).resolve().parents[3]
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, database_url, str(spool), "250"],
        stdout=subprocess.PIPE, text=True, cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
    )  # fmt: skip
    try:
        assert child.stdout is not None
        report = json.loads(child.stdout.readline())
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    assert report["stats"]["buffer_depth"] == 250 and report["stats"]["journaled"] == 250
    assert row_count(ledger_engine) == 0  # nothing had reached the database

    w = writer_factory(database_url, spool_dir=spool)
    await w.start()  # adopts the dead writer's journal
    await wait_until(lambda: row_count(ledger_engine) == 250, timeout_s=60)
    assert distinct_ids(ledger_engine) == 250
    assert w.stats()["adopted"] == 250


async def test_a_running_writer_deletes_journal_segments_whose_rows_are_written(
    database_url: str, ledger_engine: Engine, clean_ledger: None, tmp_path: Path,
    writer_factory: Any,
) -> None:
    spool = tmp_path / "spool"
    w = writer_factory(database_url, spool_dir=spool, flush_interval_s=0.1)
    await w.start()
    for burst in range(5):
        for _ in range(100):
            w.submit(make_record())
        await wait_until(lambda n=burst: row_count(ledger_engine) == 100 * (n + 1))
    journal = spool / JOURNAL_DIR

    def one_empty_segment() -> bool:
        files = list(journal.glob("*.jsonl"))
        return len(files) == 1 and files[0].stat().st_size == 0

    await wait_until(one_empty_segment, timeout_s=30)
    assert w.stats()["journaled"] == 500 and w.stats()["journal_errors"] == 0
    await w.close()
    assert not list(journal.glob("*.jsonl"))  # closed with every row written


def test_a_sealed_segment_waits_for_every_row_held_at_its_seal(tmp_path: Path) -> None:
    j = Journal(tmp_path)
    j.open()
    early, late = make_record(), make_record()
    j.append(early)
    j.append(late)
    # rows leave memory out of order: `late` committed, `early` still in a batch in flight
    j.rotate(j.new_segment(), held=[early, late])
    assert j.settled(held=[early]) == []
    (done,) = j.settled(held=[])
    Journal.delete([done])
    assert not done.path.exists()
    assert [p.name for p in (tmp_path / JOURNAL_DIR).iterdir()] != []  # the new segment
    Journal.delete(j.close_all())
    assert list((tmp_path / JOURNAL_DIR).iterdir()) == []
