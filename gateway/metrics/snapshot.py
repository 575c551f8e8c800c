"""Cumulative metric values of one replica, and how snapshots of many add up.

Pure data, no I/O. A replica accumulates into a `SeriesStore` on the request path (dict
lookups and integer/Decimal additions: a few microseconds), and periodically hands a
`Snapshot` of its cumulative values to the hub. Snapshots are cumulative, not deltas, so
a lost or repeated push never miscounts: the hub keeps the latest one per source, and
`merge_totals` adds sources up.

Money stays Decimal and durations integer milliseconds until rendering, so the sums are
exact (the ledger's sums can be compared to the cent) and only the text exposition,
which has nothing but floats, rounds.
"""

from __future__ import annotations

import bisect
import dataclasses
import threading
from collections.abc import Iterable, Mapping
from decimal import Decimal

from gateway.metrics.catalog import (
    BREAKER_REPLICAS,
    BREAKER_STATE,
    BREAKER_STATES,
    REPORTING_REPLICAS,
    ROUTING_WEIGHT,
    MetricDef,
)

Labels = tuple[str, ...]
Number = int | Decimal


@dataclasses.dataclass(frozen=True, slots=True)
class HistogramValue:
    """Per-bucket (not cumulative) counts, the last one for +Inf; sum in milliseconds."""

    bucket_counts: tuple[int, ...]
    count: int
    sum_ms: int

    def plus(self, other: HistogramValue) -> HistogramValue:
        return HistogramValue(
            tuple(a + b for a, b in zip(self.bucket_counts, other.bucket_counts, strict=True)),
            self.count + other.count,
            self.sum_ms + other.sum_ms,
        )


@dataclasses.dataclass(frozen=True, slots=True)
class Snapshot:
    source: str  # replica id + incarnation: a restarted process never reuses one
    seq: int  # grows with every change at the source: an older snapshot never wins
    sent_at: float  # the sender's wall clock, for the newest-wins gauges
    final: bool  # the replica is shutting down: no snapshot will follow
    counters: Mapping[str, Mapping[Labels, Number]]
    histograms: Mapping[str, Mapping[Labels, HistogramValue]]
    gauges: Mapping[str, Mapping[Labels, Number]]
    # when this replica last received routing weights (newest wins across replicas)
    weights_set_at: float = 0.0


@dataclasses.dataclass(slots=True)
class Totals:
    counters: dict[str, dict[Labels, Number]] = dataclasses.field(default_factory=dict)
    histograms: dict[str, dict[Labels, HistogramValue]] = dataclasses.field(default_factory=dict)
    gauges: dict[str, dict[Labels, Number]] = dataclasses.field(default_factory=dict)

    def add_cumulative(self, snap: Snapshot | Totals) -> None:
        """Add counters and histograms (never gauges: those need live sources only)."""
        for name, series in snap.counters.items():
            into = self.counters.setdefault(name, {})
            for labels, v in series.items():
                into[labels] = into.get(labels, 0) + v
        for name, hseries in snap.histograms.items():
            hinto = self.histograms.setdefault(name, {})
            for labels, h in hseries.items():
                prev = hinto.get(labels)
                if prev is None:
                    hinto[labels] = h
                elif len(prev.bucket_counts) == len(h.bucket_counts):
                    hinto[labels] = prev.plus(h)
                # else: buckets changed between releases; keep what renders consistently


class SeriesStore:
    """One replica's cumulative values; safe to call from any thread."""

    def __init__(self) -> None:
        # observe_* may come from a worker thread as well as the event loop
        self._lock = threading.Lock()
        self._counters: dict[str, dict[Labels, Number]] = {}
        self._hist: dict[str, dict[Labels, list[int]]] = {}  # buckets..., count, sum_ms
        self._bounds_ms: dict[str, list[int]] = {}
        self._gauges: dict[str, dict[Labels, Number]] = {}
        self._version = 0  # bumped on every change: unchanged stores need no push

    @property
    def version(self) -> int:
        return self._version

    def inc(self, metric: MetricDef, labels: Labels, amount: Number = 1) -> None:
        with self._lock:
            self._inc(metric, labels, amount)
            self._version += 1

    def add_all(
        self,
        incs: Iterable[tuple[MetricDef, Labels, Number]],
        observations: Iterable[tuple[MetricDef, Labels, int]] = (),
    ) -> None:
        """Many updates under one lock: what one request changes, at once."""
        with self._lock:
            for metric, labels, amount in incs:
                self._inc(metric, labels, amount)
            for metric, labels, ms in observations:
                self._observe(metric, labels, ms)
            self._version += 1

    def _inc(self, metric: MetricDef, labels: Labels, amount: Number) -> None:
        series = self._counters.get(metric.name)
        if series is None:
            series = self._counters[metric.name] = {}
        series[labels] = series.get(labels, 0) + amount

    def set_counter(self, metric: MetricDef, labels: Labels, value: Number) -> None:
        """For counts kept cumulatively elsewhere (the record writer's)."""
        with self._lock:
            self._counters.setdefault(metric.name, {})[labels] = value
            self._version += 1

    def observe_ms(self, metric: MetricDef, labels: Labels, ms: int) -> None:
        with self._lock:
            self._observe(metric, labels, ms)
            self._version += 1

    def _observe(self, metric: MetricDef, labels: Labels, ms: int) -> None:
        bounds = self._bounds_ms.get(metric.name)
        if bounds is None:
            bounds = self._bounds_ms[metric.name] = [round(b * 1000) for b in metric.buckets]
        series = self._hist.setdefault(metric.name, {})
        cells = series.get(labels)
        if cells is None:
            cells = series[labels] = [0] * (len(bounds) + 3)
        # `le` is inclusive: a value equal to a bound belongs to that bucket
        cells[bisect.bisect_left(bounds, ms)] += 1
        cells[-2] += 1
        cells[-1] += ms

    def set_gauge(self, metric: MetricDef, labels: Labels, value: Number) -> None:
        with self._lock:
            self._gauges.setdefault(metric.name, {})[labels] = value
            self._version += 1

    def add_gauge(self, metric: MetricDef, labels: Labels, delta: Number) -> None:
        with self._lock:
            series = self._gauges.setdefault(metric.name, {})
            series[labels] = series.get(labels, 0) + delta
            self._version += 1

    def replace_gauges(self, metric: MetricDef, series: Mapping[Labels, Number]) -> None:
        with self._lock:
            self._gauges[metric.name] = dict(series)
            self._version += 1

    def snapshot(self, source: str, sent_at: float, final: bool, weights_set_at: float) -> Snapshot:
        with self._lock:
            return Snapshot(
                source=source,
                seq=self._version,
                sent_at=sent_at,
                final=final,
                counters={n: dict(s) for n, s in self._counters.items()},
                histograms={
                    n: {lbl: HistogramValue(tuple(c[:-2]), c[-2], c[-1]) for lbl, c in s.items()}
                    for n, s in self._hist.items()
                },
                gauges={n: dict(s) for n, s in self._gauges.items()},
                weights_set_at=weights_set_at,
            )


# open is the state ops must see first, then half-open; closed only if every replica agrees
_SEVERITY = {1: 2, 2: 1, 0: 0}


def merge_totals(retired: Totals, kept: Iterable[Snapshot], live: Iterable[Snapshot]) -> Totals:
    """Totals over every source ever seen; gauges over `live` sources only.

    `retired` holds the folded counters of sources that will never push again, `kept`
    the latest snapshot of every other source (live or silent), `live` those recent
    enough for their gauges to count.
    """
    out = Totals()
    out.add_cumulative(retired)
    for snap in kept:
        out.add_cumulative(snap)
    live = list(live)
    newest_weights: Snapshot | None = None
    breaker_states: dict[Labels, list[int]] = {}
    for snap in live:
        for name, series in snap.gauges.items():
            if name == ROUTING_WEIGHT.name:
                if newest_weights is None or snap.weights_set_at > newest_weights.weights_set_at:
                    newest_weights = snap
                continue
            if name == BREAKER_STATE.name:
                for labels, state in series.items():
                    breaker_states.setdefault(labels, []).append(int(state))
                continue
            into = out.gauges.setdefault(name, {})
            for labels, v in series.items():
                into[labels] = into.get(labels, 0) + v
    if newest_weights is not None:
        out.gauges[ROUTING_WEIGHT.name] = dict(newest_weights.gauges[ROUTING_WEIGHT.name])
    if breaker_states:
        worst = out.gauges.setdefault(BREAKER_STATE.name, {})
        per_state = out.gauges.setdefault(BREAKER_REPLICAS.name, {})
        for labels, states in breaker_states.items():
            worst[labels] = max(states, key=lambda s: _SEVERITY.get(s, 0))
            for code, state_name in BREAKER_STATES.items():
                per_state[(*labels, state_name)] = sum(1 for s in states if s == code)
    out.gauges[REPORTING_REPLICAS.name] = {(): len(live)}
    return out
