"""The spool's file protocol on its own (no database): reading lines back without trusting
them, ownership by file lock rather than by PID, rotation, and what reaches the disk."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gateway.ledger.spool import Spool
from gateway.ledger.spool_files import MAX_LINE_BYTES, read_batch
from tests.gateway.ledger.support import ROOT, make_record, spool_lines


@pytest.fixture
def spools(tmp_path: Path) -> Iterator[Callable[[], Spool]]:
    """Spools on one directory, each closed afterwards: a held lock would outlive the test."""
    made: list[Spool] = []

    def make() -> Spool:
        s = Spool(tmp_path / "spool")
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


# -- reading lines back -------------------------------------------------------------------


def test_a_batch_resumes_where_the_last_one_ended_and_sets_bad_and_torn_lines_aside(
    tmp_path: Path,
) -> None:
    good = [make_record() for _ in range(3)]
    path = tmp_path / "usage-replay-1-abc-0.jsonl"
    lines = [good[0].to_json(), good[1].to_json(), "", "{not json}", good[2].to_json()]
    # the last line torn: a crash mid-append
    path.write_text("".join(line + "\n" for line in lines) + good[0].to_json()[:40])
    first = read_batch(path, 0, 2)
    assert [r.request_id for r in first.records] == [r.request_id for r in good[:2]]
    assert first.bad == [] and not first.at_end
    rest = read_batch(path, first.end, 10)
    assert [r.request_id for r in rest.records] == [good[2].request_id]
    assert [b.raw for b in rest.bad] == [b"{not json}\n", good[0].to_json()[:40].encode()]
    assert rest.bad[0].reason.startswith("JSONDecodeError")
    assert rest.bad[1].reason == "torn line (no newline)"
    assert rest.end == path.stat().st_size and rest.at_end
    assert read_batch(path, rest.end, 10).consumed == 0


def _with(field: str, value: object) -> str:
    return json.dumps({**json.loads(make_record().to_json()), field: value})


POISON = {
    "not-json": b"{not json}",
    "decimal-1e": _with("actual_cost", "1e").encode(),  # decimal.InvalidOperation
    "uuid-as-number": _with("request_id", 12345).encode(),  # AttributeError
    "bad-date": _with("started_at", "yesterday").encode(),
    "bad-enum": _with("status", "maybe").encode(),
    "missing-field": json.dumps({"request_id": "x"}).encode(),
    "unknown-field": _with("surprise", 1).encode(),  # TypeError from the dataclass
    "a-list": b"[1, 2, 3]",
    "null": b"null",
    "not-utf8": b'{"app": "\xff\xfe"}',
    "deeply-nested": b"[" * 100_000 + b"]" * 100_000,  # RecursionError
}


@pytest.mark.parametrize("poison", POISON.values(), ids=POISON.keys())
def test_no_line_can_make_reading_raise_and_the_lines_after_it_are_read(
    tmp_path: Path, poison: bytes
) -> None:
    before, after = make_record(), make_record()
    path = tmp_path / "usage-replay-1-abc-0.jsonl"
    path.write_bytes(
        before.to_json().encode() + b"\n" + poison + b"\n" + after.to_json().encode() + b"\n"
    )
    batch = read_batch(path, 0, 10)
    assert [r.request_id for r in batch.records] == [before.request_id, after.request_id]
    (bad,) = batch.bad
    assert bad.raw == poison + b"\n" and bad.offset == len(before.to_json()) + 1
    # the quarantine keeps the very bytes, even those that are not UTF-8
    kept = json.loads(bad.to_json(path.name))
    assert kept["source"] == path.name and kept["offset"] == bad.offset
    assert kept["line"].encode("utf-8", "surrogateescape") == bad.raw


def test_a_line_past_the_length_bound_is_set_aside_without_reading_it_whole(
    tmp_path: Path,
) -> None:
    after = make_record()
    path = tmp_path / "usage-replay-1-abc-0.jsonl"
    path.write_bytes(b"x" * (MAX_LINE_BYTES * 3) + b"\n" + after.to_json().encode() + b"\n")
    batch = read_batch(path, 0, 10)
    assert [r.request_id for r in batch.records] == [after.request_id]
    (bad,) = batch.bad
    assert bad.reason == "line too long" and len(bad.raw) <= 4096 and batch.at_end


def test_a_file_is_read_no_further_than_the_end_it_was_spooled_to(tmp_path: Path) -> None:
    kept, beyond = make_record(), make_record()
    path = tmp_path / "usage-replay-1-abc-0.jsonl"
    head = kept.to_json().encode() + b"\n"
    path.write_bytes(head + beyond.to_json().encode() + b"\n")
    batch = read_batch(path, 0, 10, end=len(head))
    assert [r.request_id for r in batch.records] == [kept.request_id]
    assert batch.at_end and batch.end == len(head)


# -- ownership: a lock, never a PID -------------------------------------------------------

# holds an exclusive flock on argv[1] until its stdin closes: a live writer elsewhere
_HOLDER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.read()
"""


def test_a_file_locked_by_a_live_process_is_left_alone_whatever_its_name_says(
    spools: Callable[[], Spool], tmp_path: Path
) -> None:
    spool_dir = tmp_path / "spool"
    spool_dir.mkdir()
    records = [make_record() for _ in range(3)]
    # the PID in the name is one that does not exist (as after a container restart,
    # where a new process may even get the old one's PID): only the lock tells
    held = spool_dir / "usage-spool-999999-0000deadbeef.jsonl"
    held.write_text("".join(r.to_json() + "\n" for r in records))
    # and an unlocked file named after a live process (ours) is an orphan all the same
    unlocked = spool_dir / f"usage-spool-{os.getpid()}-0000cafe0000.jsonl"
    unlocked.write_text(make_record().to_json() + "\n")

    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(held)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"locked\n"
        bystander = spools()
        bystander.open()
        assert bystander.adopted == 1 and held.exists() and not unlocked.exists()
    finally:
        assert holder.stdin is not None
        holder.stdin.close()  # the holder exits: the kernel drops its lock
        holder.wait(timeout=10)

    heir = spools()
    heir.open()
    assert heir.adopted == 3 and heir.depth == 3 and not held.exists()
    replay = heir.next_replay()
    assert replay is not None
    assert replay.path.name.startswith(f"usage-replay-{os.getpid()}-{heir.token}-")
    batch = heir.read(replay, 10)
    assert [r.request_id for r in batch.records] == [r.request_id for r in records]
    heir.advance(replay, batch)
    assert heir.depth == 0 and not replay.path.exists() and heir.next_replay() is None


def test_a_live_writers_files_are_left_alone_and_adopted_once_it_is_closed(
    spools: Callable[[], Spool],
) -> None:
    owner = spools()
    owner.open()
    owner.append([make_record() for _ in range(2)])
    claimed = owner.next_replay()  # rotated: now a replay file, still held
    assert claimed is not None
    owner.append([make_record()])

    bystander = spools()
    bystander.open()  # same process, its own descriptors: the locks hold against it too
    assert bystander.adopted == 0 and bystander.next_replay() is None

    owner.close()
    heir = spools()
    heir.open()
    assert heir.adopted == 3 and heir.depth == 3


def test_the_own_file_is_rotated_for_replay_and_appends_start_a_fresh_one(
    spools: Callable[[], Spool],
) -> None:
    s = spools()
    s.open()
    s.append([make_record() for _ in range(3)])
    replay = s.next_replay()
    assert replay is not None and replay.lines == 3 and s.adopted == 0
    s.append([make_record()])
    assert s.depth == 4 and spool_lines(s.directory) == 4
    assert len(list(s.directory.glob("usage-spool-*.jsonl"))) == 1


# -- what reaches the disk ----------------------------------------------------------------

# spools three records and only then says so, then dies without closing anything
_SPOOLER = """
import os, sys
from pathlib import Path
from gateway.ledger.spool import Spool
from tests.gateway.ledger.support import make_record
s = Spool(Path(sys.argv[1]))
s.open()
records = [make_record() for _ in range(3)]
s.append(records)
print("SPOOLED", *(r.request_id for r in records), flush=True)
os._exit(0)
"""


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace (.ci/test-deps)")
def test_a_row_is_reported_spooled_only_after_its_write_and_fsync_returned(
    tmp_path: Path,
) -> None:
    spool_dir, trace = tmp_path / "spool", tmp_path / "trace"
    out = subprocess.run(
        ["strace", "-f", "-qq", "-s", "200", "-o", str(trace),
         "-e", "trace=openat,write,fsync,rename",
         sys.executable, "-c", _SPOOLER, str(spool_dir)],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    ids = out.split()[1:]
    calls = [line.split(None, 1)[1] for line in trace.read_text().splitlines()]

    def first(pattern: str) -> int:
        return next(i for i, c in enumerate(calls) if re.search(pattern, c))

    created = first(r"openat\(.*usage-spool-.*O_CREAT.*= \d+$")
    fd = calls[created].rsplit("= ", 1)[1]
    dir_fd = calls[first(rf'openat\(AT_FDCWD, "{re.escape(str(spool_dir))}", .*O_DIRECTORY')]
    dir_fd = dir_fd.rsplit("= ", 1)[1]
    told = first(r"^write\(1, \"SPOOLED")
    data = first(rf"^write\({fd}, \"\{{")
    assert created < first(rf"^fsync\({dir_fd}\) += 0") < told  # the name is durable
    assert data < first(rf"^fsync\({fd}\) += 0") < told  # and so are the bytes
    # and another process (this one) finds them in the file
    (spooled,) = spool_dir.glob("usage-spool-*.jsonl")
    assert [json.loads(line)["request_id"] for line in spooled.read_text().splitlines()] == ids


def test_spool_quarantine_and_rejected_files_are_readable_by_this_user_only(
    spools: Callable[[], Spool],
) -> None:
    from gateway.ledger.spool_files import BadLine

    old = os.umask(0o022)  # a permissive umask: the files' own mode must hold anyway
    try:
        s = spools()
        s.open()
        s.append([make_record()])
        replay = s.next_replay()
        assert replay is not None
        s.quarantine(replay, [BadLine(0, "JSONDecodeError", b"{not json}\n")])
        s.keep_rejected([make_record()])
        s.append([make_record()])  # a fresh own file after the rotation
    finally:
        os.umask(old)
    files = {p.name: p.stat().st_mode & 0o777 for p in s.directory.iterdir() if p.is_file()}
    kinds = {name.split("-")[1] for name in files}
    assert {"spool", "quarantine", "rejected"} <= kinds, files
    assert set(files.values()) == {0o600}, files
