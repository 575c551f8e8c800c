"""Daily rollups of the ledger, kept in the dashboard process, so pages stay fast at 1M+ rows.

A closed UTC day's cube and latency histograms change only when late rows arrive (a
writer replaying its spool after a database outage), so each closed day is fetched once,
unfiltered, and refreshed in the background after `CLOSED_DAY_TTL_S` (pages keep using
the previous copy meanwhile); filters are applied in pandas (the cube carries every
filter dimension). Only today is read from the ledger on every refresh. Many days missing
at once are fetched in one GROUP BY over their span. `warm()` starts that fetch in the
background, so that it runs while a user signs in.

With a `DayStore`, closed days also persist on local disk: a dashboard process that
starts (a restart, a second replica) serves them at once instead of making its first
visitor wait for a scan of the whole ledger. A stored day is used only while the
ledger's row count for that day (one cheap indexed count for the whole span) still
equals the stored one: the ledger only ever inserts, so a late row or an emptied ledger
shows as a different count, and that day is fetched anew.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import os
import pickle
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from dashboard.cube import empty_cube
from dashboard.latency import empty_histogram

CLOSED_DAY_TTL_S = 600.0
log = logging.getLogger(__name__)

# (start, end) -> (cube, histogram) at day grain, unfiltered, for [start, end)
Fetch = Callable[[dt.datetime, dt.datetime], tuple[pd.DataFrame, pd.DataFrame]]
# (start, end) -> rows per UTC day in [start, end)
Count = Callable[[dt.datetime, dt.datetime], dict[dt.date, int]]


@dataclasses.dataclass(frozen=True)
class _Day:
    loaded_at: float
    cube: pd.DataFrame
    hist: pd.DataFrame


class DayStore:
    """Closed days' cube and histogram as pickles under a folder (ours alone: the
    dashboard writes and reads them; money columns keep their exact Decimals)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _path(self, day: dt.date) -> Path:
        return self.folder / f"{day.isoformat()}.pkl"

    def load(self, day: dt.date) -> tuple[pd.DataFrame, pd.DataFrame, float] | None:
        """(cube, histogram, age in seconds), or None if absent or unreadable."""
        path = self._path(day)
        try:
            age = time.time() - path.stat().st_mtime
            cube, hist = pd.read_pickle(path)
        except Exception:  # noqa: BLE001 - a missing or broken file is fetched anew
            return None
        if list(cube.columns) != list(empty_cube().columns) or list(hist.columns) != list(
            empty_histogram().columns
        ):
            return None  # stored before the cube gained a dimension: fetched anew
        return cube, hist, max(0.0, age)

    def save(self, day: dt.date, cube: pd.DataFrame, hist: pd.DataFrame) -> None:
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            tmp = self._path(day).with_suffix(f".{os.getpid()}.tmp")
            with tmp.open("wb") as out:  # what pd.to_pickle writes (absent from pandas-stubs)
                pickle.dump((cube, hist), out, protocol=pickle.HIGHEST_PROTOCOL)
            tmp.replace(self._path(day))  # atomic: a reader never sees half a file
        except OSError as err:
            log.warning("rollup of %s not saved: %s", day, err)


def _span(first: dt.date, last: dt.date) -> list[dt.date]:
    return [first + dt.timedelta(days=i) for i in range((last - first).days + 1)]


def _midnight(day: dt.date) -> dt.datetime:
    return dt.datetime.combine(day, dt.time(), dt.UTC)


class LedgerRollup:
    def __init__(
        self,
        fetch: Fetch,
        ttl_s: float = CLOSED_DAY_TTL_S,
        clock: Callable[[], float] = time.monotonic,
        store: DayStore | None = None,
        count: Count | None = None,
    ) -> None:
        if store is not None and count is None:
            raise ValueError("a store needs a count to check its days against the ledger")
        self._fetch = fetch
        self._store = store
        self._count = count
        self._ttl_s = ttl_s
        self._clock = clock
        self._days: dict[dt.date, _Day] = {}
        self._lock = threading.Lock()  # sessions run in threads: fetch a day once
        self._background: threading.Thread | None = None

    def days(self, first: dt.date, last: dt.date) -> tuple[pd.DataFrame, pd.DataFrame]:
        """Cube and histogram rows of the closed days first..last (inclusive)."""
        wanted = _span(first, last)
        with self._lock:
            missing = [d for d in wanted if d not in self._days]
            if missing and self._store is not None:
                self._restore(missing)
                missing = [d for d in wanted if d not in self._days]
            if missing:
                self._load(missing[0], missing[-1])
            parts = [self._days[d] for d in wanted]
        now = self._clock()
        stale = [d for d in wanted if now - self._days[d].loaded_at > self._ttl_s]
        if stale:
            self._in_background(stale[0], stale[-1])
        cubes = [p.cube for p in parts if len(p.cube)]
        hists = [p.hist for p in parts if len(p.hist)]
        return (
            pd.concat(cubes, ignore_index=True) if cubes else empty_cube(),
            pd.concat(hists, ignore_index=True) if hists else empty_histogram(),
        )

    def warm(self, first: dt.date, last: dt.date) -> None:
        """Fetch the days not held yet, in the background."""
        missing = [d for d in _span(first, last) if d not in self._days]
        if missing:
            self._in_background(missing[0], missing[-1])

    def wait(self, timeout_s: float | None = None) -> None:
        """Until the background fetch (if any) is done."""
        thread = self._background
        if thread is not None:
            thread.join(timeout_s)

    def _in_background(self, first: dt.date, last: dt.date) -> None:
        if self._background is not None and self._background.is_alive():
            return  # one at a time; a later call picks up what is still missing or stale

        def run() -> None:
            try:
                with self._lock:
                    self._load(first, last)
            except Exception as err:  # noqa: BLE001 - a page asking for these days will retry
                log.warning("background rollup of %s..%s failed: %s", first, last, err)

        self._background = threading.Thread(target=run, name="ledger-rollup", daemon=True)
        self._background.start()

    def _restore(self, days: list[dt.date]) -> None:
        """Take the stored days whose row count the ledger still has."""
        assert self._store is not None and self._count is not None
        saved = {d: v for d in days if (v := self._store.load(d)) is not None}
        if not saved:
            return
        counts = self._count(_midnight(min(saved)), _midnight(max(saved) + dt.timedelta(days=1)))
        for day, (cube, hist, age_s) in saved.items():
            stored = int(cube["requests"].sum()) if len(cube) else 0
            if stored == counts.get(day, 0):
                self._days[day] = _Day(loaded_at=self._clock() - age_s, cube=cube, hist=hist)

    def _load(self, first: dt.date, last: dt.date) -> None:
        now = self._clock()
        cube, hist = self._fetch(_midnight(first), _midnight(last + dt.timedelta(days=1)))
        cube_days = cube["bucket"].dt.date if len(cube) else pd.Series(dtype=object)
        hist_days = hist["bucket"].dt.date if len(hist) else pd.Series(dtype=object)
        day = first
        while day <= last:
            loaded = _Day(
                loaded_at=now,
                cube=cube[cube_days == day].reset_index(drop=True) if len(cube) else empty_cube(),
                hist=hist[hist_days == day].reset_index(drop=True)
                if len(hist)
                else empty_histogram(),
            )
            self._days[day] = loaded
            if self._store is not None:
                self._store.save(day, loaded.cube, loaded.hist)
            day += dt.timedelta(days=1)
