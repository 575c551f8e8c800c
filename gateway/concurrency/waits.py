"""Bounded waits and cancellations that never swallow a cancellation.

Python 3.11's `asyncio.wait_for` returns the inner result when its caller is cancelled at
the moment the inner awaitable completes (gh-86296, fixed in 3.12 by rebuilding it on
`asyncio.timeout`). A loop that awaits it can thus ignore the `cancel()` a `close()`
sends, and `close()` then waits for ever (the one way found for a Ray actor's metrics
`close()` to hang a CI run until its time limit, docs/TESTING.md). So the runtime waits
with these.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable
from typing import TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


async def within(awaitable: Awaitable[T], timeout_s: float) -> T:
    """`awaitable`'s result, or TimeoutError after `timeout_s`; a cancellation always wins."""
    async with asyncio.timeout(timeout_s):
        return await awaitable


async def wait_event(event: asyncio.Event, timeout_s: float) -> None:
    """Until `event` is set or `timeout_s` passed."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout_s):
            await event.wait()


async def cancel_until_done(task: asyncio.Task[None], rounds: int = 20) -> None:
    """Cancel `task` and wait for it, asking again every 0.5 s (`rounds` times at most):
    code below us (a library) may swallow one request."""
    for _ in range(rounds):
        if task.done():
            break
        task.cancel()
        await asyncio.wait({task}, timeout=0.5)
    if not task.done():
        log.error("task %s ignores its cancellation", task.get_name())
    elif not task.cancelled() and task.exception() is not None:
        log.error("task %s failed", task.get_name(), exc_info=task.exception())
