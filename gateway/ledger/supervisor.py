"""Keeping the record writer's loops alive, and telling when they are not.

The writer's loops hold every row a replica has not yet stored: a bug that ends one
would silently stop the ledger while the gateway keeps serving. So each loop runs under
`Supervisor.run`, which restarts it after any exception, with jittered exponential
backoff, after a recovery step that puts the loop's rows back where the next run finds
them. Restarts are counted.

Restarting is not enough to call a loop alive, though: a loop that fails on every pass
(a poison the recovery cannot clear) or that waits forever (a disk that hangs a thread)
is no use. A loop reports progress with `beat()` (it is working) and `completed()` (a
pass ended well); `problems()` says which loops ended, crash in a row, or have not beaten
for longer than `stall_after_s`.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)

# a loop that crashed this many times in a row, with no pass completed between, is
# dead: a new process (a replaced replica) is the remedy left
CRASHES_BEFORE_DEAD = 5


def error_text(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}"[:300]


class Supervisor:
    def __init__(self, *, stall_after_s: float, retry_initial_s: float, retry_max_s: float) -> None:
        self._stall_after = stall_after_s
        self._retry_initial = retry_initial_s
        self._retry_max = retry_max_s
        self.restarts = 0
        self.last_crash = ""
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._beats: dict[str, float] = {}
        self._crashes: dict[str, int] = {}  # in a row

    def start(
        self,
        name: str,
        body: Callable[[], Awaitable[None]],
        recover: Callable[[], Awaitable[None]] | None = None,
        *,
        give_up: Callable[[], bool] = lambda: False,
    ) -> asyncio.Task[None]:
        """Run `body` in a task until it returns; `give_up()` ends restarts (closing)."""
        self._beats[name] = time.monotonic()
        self._crashes[name] = 0
        task = asyncio.get_running_loop().create_task(
            self._run(name, body, recover, give_up), name=f"record-writer-{name}"
        )
        self._tasks[name] = task
        return task

    def task(self, name: str) -> asyncio.Task[None] | None:
        return self._tasks.get(name)

    def beat(self, name: str) -> None:
        self._beats[name] = time.monotonic()

    def completed(self, name: str) -> None:
        self._beats[name] = time.monotonic()
        self._crashes[name] = 0

    def problems(self) -> list[str]:
        """Why the loops are not alive; empty when every one is."""
        now = time.monotonic()
        out: list[str] = []
        for name, task in self._tasks.items():
            crashes, idle = self._crashes[name], now - self._beats[name]
            if task.done():
                out.append(f"record writer {name} loop ended")
            elif crashes >= CRASHES_BEFORE_DEAD:
                out.append(
                    f"record writer {name} loop crashed {crashes} times in a row"
                    f" (last: {self.last_crash})"
                )
            elif idle > self._stall_after:
                out.append(f"record writer {name} loop made no progress for {idle:.0f} s")
        return out

    async def _run(
        self,
        name: str,
        body: Callable[[], Awaitable[None]],
        recover: Callable[[], Awaitable[None]] | None,
        give_up: Callable[[], bool],
    ) -> None:
        delay = self._retry_initial
        while True:
            try:
                await body()
                return
            except Exception as err:
                self.restarts += 1
                self._crashes[name] += 1
                self.last_crash = f"{name}: {error_text(err)}"
                log.exception("record writer: the %s loop failed; restarting it", name)
            if recover is not None:
                try:
                    await recover()
                except Exception:
                    log.exception("record writer: recovering the %s loop failed", name)
            if give_up():
                return
            # a loop that ran fine for a while before failing starts over gently again
            if self._crashes[name] == 1:
                delay = self._retry_initial
            await asyncio.sleep(delay * random.uniform(0.5, 1.0))
            delay = min(delay * 2, self._retry_max)

