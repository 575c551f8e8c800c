"""Dated FX on the request path: the replica prices each request at the rates in force
on its UTC day, without a database call per request.

The schedule is loaded at start and every `FX_REFRESH_S`; the catalog is rebuilt from
the config's catalog for the current day and swapped in one reference
(`GatewayService.set_catalog`) when a load or midnight changes it. A request started in
the last moments before midnight may be priced at the new day's rate: at most
`FX_REFRESH_S` late on a day a rate changes, and usually exact (the loop wakes at
midnight). While PostgreSQL is away the last loaded schedule stays in force.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable
from typing import Protocol

from gateway.domain.pricing import PriceCatalog
from gateway.finance.fx import FxSchedule, catalog_on

log = logging.getLogger("costgate.gateway")
FX_REFRESH_S = 60.0


def utc_today() -> dt.date:
    return dt.datetime.now(dt.UTC).date()


def seconds_to_midnight(now: dt.datetime) -> float:
    tomorrow = dt.datetime.combine(now.date() + dt.timedelta(days=1), dt.time(), dt.UTC)
    return (tomorrow - now).total_seconds()


class PricedService(Protocol):
    """What the refresher needs of the replica's `GatewayService`."""

    catalog: PriceCatalog

    def set_catalog(self, catalog: PriceCatalog) -> None: ...


class FxRefresher:
    """Loads are injected (`load`, run in a thread): this module does no I/O itself."""

    def __init__(
        self,
        service: PricedService,
        load: Callable[[], FxSchedule],
        every_s: float = FX_REFRESH_S,
    ) -> None:
        self.service, self.load, self.every_s = service, load, every_s
        self.base = service.catalog  # the config's catalog, at the config's FX
        self.schedule = FxSchedule()
        self._task: asyncio.Task[None] | None = None

    def apply(self, day: dt.date) -> bool:
        """Swap in the catalog for `day`; True when it changed a price version."""
        catalog = catalog_on(self.base, self.schedule, day)
        current = self.service.catalog
        same = catalog.versions.keys() == current.versions.keys() and all(
            v.id == current.versions[name].id for name, v in catalog.versions.items()
        )
        if not same:
            self.service.set_catalog(catalog)
        return not same

    async def refresh(self) -> None:
        try:
            self.schedule = await asyncio.to_thread(self.load)
        except Exception as err:  # noqa: BLE001 - keep the last schedule; retry later
            log.warning("FX rates not refreshed: %s", type(err).__name__)
        self.apply(utc_today())

    def start(self) -> None:
        async def loop() -> None:
            while True:
                now = dt.datetime.now(dt.UTC)
                # wake just after midnight too: a new day may bring a new rate into force
                await asyncio.sleep(min(self.every_s, seconds_to_midnight(now) + 0.05))
                await self.refresh()

        self._task = asyncio.get_running_loop().create_task(loop())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
