"""A writer that cannot die, against a real PostgreSQL: its loops survive their own bugs
without losing the rows they held, and it says when it is dead for real.

No input makes a loop fail any more (that is what the other tests pin), so the bugs here
are injected: a method of the live writer that raises, as a bug would.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from sqlalchemy import Engine

from gateway.ledger import supervisor
from gateway.ledger.writer import RecordWriter
from tests.gateway.ledger.support import distinct_ids, make_record, row_count, wait_until

pytestmark = pytest.mark.usefixtures("clean_ledger")


class Bug(RuntimeError):
    pass


def _break(objs: Sequence[Any], method: str, times: int | None) -> list[int]:
    """Make `method` of every one of `objs` raise `times` times in all (None: until
    repaired), then work again."""
    raised = [0]

    def breaking(real: Callable[..., Any]) -> Callable[..., Any]:
        async def broken(*args: Any, **kwargs: Any) -> Any:
            if times is None or raised[0] < times:
                raised[0] += 1
                raise Bug(f"injected in {method}")
            return await real(*args, **kwargs)

        return broken

    for obj in objs:
        setattr(obj, method, breaking(getattr(obj, method)))
    return raised


async def test_the_loop_restarts_after_an_exception_and_loses_none_of_the_rows_it_held(
    database_url: str, ledger_engine: Engine, writer_factory: Callable[..., RecordWriter]
) -> None:
    w = writer_factory(database_url, batch_size=50, retry_initial_s=0.05)
    await w.start()
    # the rows are taken from the buffer, then the write blows up under them
    raised = _break(w._lanes.databases, "write", times=1)
    for _ in range(120):
        w.submit(make_record())
    await wait_until(lambda: w.stats()["written"] == 120)
    assert raised == [1] and w.stats()["restarts"] == 1
    assert row_count(ledger_engine) == 120 == distinct_ids(ledger_engine)
    health = w.health()
    assert health.alive and health.ready and health.restarts == 1

    w.submit(make_record())  # and it writes on
    await wait_until(lambda: row_count(ledger_engine) == 121)


async def test_a_loop_that_fails_every_time_is_dead_and_alive_again_once_it_works(
    database_url: str, ledger_engine: Engine, writer_factory: Callable[..., RecordWriter]
) -> None:
    w = writer_factory(database_url, retry_initial_s=0.02, retry_max_s=0.05)
    await w.start()
    raised = _break(w._lanes.databases, "write", times=None)
    w.submit(make_record())
    # the crash reaches the supervisor a turn of the loop after the write raised (the
    # write runs in a task of its own: gateway.ledger.lanes), and it keeps restarting
    await wait_until(lambda: not w.health().alive)
    health = w.health()
    assert raised[0] >= supervisor.CRASHES_BEFORE_DEAD and not health.ready
    crashes = re.search(r"crashed (\d+) times in a row", health.problems[0])
    assert crashes is not None and int(crashes[1]) >= supervisor.CRASHES_BEFORE_DEAD
    assert "Bug: injected in write" in health.problems[0]
    assert health.buffer_depth == 1  # its row is still held

    for db in w._lanes.databases:
        del db.write  # repaired: the class's method again
    await wait_until(lambda: row_count(ledger_engine) == 1)
    await wait_until(lambda: w.health().alive)
    assert w.stats()["restarts"] >= supervisor.CRASHES_BEFORE_DEAD


async def test_the_spool_loop_restarts_too_and_a_loop_that_hangs_is_not_alive(
    database_url: str, writer_factory: Callable[..., RecordWriter]
) -> None:
    w = writer_factory(database_url, stall_after_s=0.5, retry_initial_s=0.02)
    await w.start()
    spool: Any = w._spool
    real = spool.adopt_orphans_when_due
    calls, hang, release = [0], [False], threading.Event()

    def broken() -> int:  # runs in a worker thread, as the real one does
        calls[0] += 1
        if calls[0] == 1:
            raise Bug("injected in the orphan scan")
        if hang[0]:
            release.wait(30)  # a disk that does not answer
        return int(real())

    spool.adopt_orphans_when_due = broken
    await wait_until(lambda: w.stats()["restarts"] == 1 and calls[0] >= 3)
    assert w.health().alive

    hang[0] = True
    await wait_until(lambda: not w.health().alive)
    (problem,) = w.health().problems
    assert problem.startswith("record writer spool loop made no progress for")
    release.set()
    await wait_until(lambda: w.health().alive)

    task = w._loops.task("spool")
    assert task is not None
    task.cancel()  # as if the loop's task ended, which nothing but close() should do
    await wait_until(task.done)
    assert w.health().problems == ("record writer spool loop ended",)
