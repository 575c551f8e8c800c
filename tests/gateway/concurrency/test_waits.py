"""The runtime's bounded waits: a cancellation that meets a completion is never lost."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from gateway.concurrency.waits import cancel_until_done, wait_event, within


async def _cancel_as_it_completes(wait: Callable[[asyncio.Future[int]], Awaitable[int]]) -> bool:
    """Whether a task awaiting `wait(future)` ends cancelled when the future completes in
    the same turn of the loop as the task's cancellation (gh-86296's race)."""
    future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    task = asyncio.ensure_future(wait(future))
    await asyncio.sleep(0)  # the task is waiting now
    future.set_result(1)
    task.cancel()
    await asyncio.wait({task})
    return task.cancelled()


async def test_within_never_swallows_a_cancellation_that_meets_a_completion():
    assert await _cancel_as_it_completes(lambda f: within(f, 10))
    # the library wait it replaces loses it on this Python: the reason for the module
    assert not await _cancel_as_it_completes(lambda f: asyncio.wait_for(f, 10))


async def test_within_returns_the_result_or_raises_timeout_error():
    assert await within(asyncio.sleep(0, result="done"), 1) == "done"
    with pytest.raises(TimeoutError):
        await within(asyncio.Event().wait(), 0.01)


async def test_wait_event_ends_on_the_event_or_the_timeout():
    event = asyncio.Event()
    await wait_event(event, 0.01)  # no event: the timeout, quietly
    asyncio.get_running_loop().call_soon(event.set)
    await asyncio.wait_for(wait_event(event, 30), 5)


async def test_cancel_until_done_asks_again_a_task_that_swallowed_a_cancellation():
    swallowed = []

    async def stubborn() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            swallowed.append(True)  # as a library below a loop might
        await asyncio.Event().wait()

    task = asyncio.create_task(stubborn())
    await asyncio.sleep(0)
    await cancel_until_done(task, rounds=3)
    assert swallowed == [True] and task.cancelled()
