"""The one place that knows the totals: a detached, named Ray actor holding snapshots.

`HubState` is the pure part (what to keep, what counts, when a source is gone) with an
injectable clock; `MetricsHub` wraps it as the actor; `hub_handle()` finds or creates it.

- Counters and histograms: the latest snapshot of every source counts forever, so the
  totals stay monotonic when replicas are replaced or scaled down. A source that says
  goodbye (a final snapshot on graceful shutdown), or is silent for `retire_after_s`, is
  folded into one `retired` total and forgotten, so memory follows the label
  cardinality, not the replica churn. Its id is tombstoned: a snapshot arriving after
  that is ignored rather than counted twice.
- Gauges (in flight, breaker states, routing weights, buffer depths) describe the
  present, so only sources heard from within `stale_after_s` count.
- Snapshots carry a per-source sequence number; an older one never replaces a newer one.

The actor is detached (it outlives `costgate up`'s driver and any replica), pinned to the
head node (whose life is the cluster's, so the autoscaler never retires it as an idle
worker), uses no CPU, and is restarted by Ray if its process dies: replicas then push
their cumulative values again and the totals come back, less what retired sources had
contributed; Prometheus reads that drop as a counter reset, which `rate()` handles.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from gateway.metrics.catalog import WRITER_HEALTH_METRICS, WRITER_STAT_METRICS, Kind
from gateway.metrics.exposition import render_totals
from gateway.metrics.snapshot import Snapshot, Totals, merge_totals

HUB_NAMESPACE = "costgate"
# the head node's own resource: Ray Train pins its state actor the same way
_HEAD_NODE_RESOURCE = "node:__internal_head__"


def hub_name(app_name: str) -> str:
    return f"costgate_metrics_hub.{app_name}"


class HubState:
    def __init__(
        self,
        stale_after_s: float = 10.0,
        retire_after_s: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stale_after_s = stale_after_s
        self._retire_after_s = retire_after_s
        self._clock = clock
        self._retired = Totals()
        self._tombstones: set[str] = set()
        self._latest: dict[str, tuple[Snapshot, float]] = {}

    def push(self, snap: Snapshot) -> bool:
        """Keep `snap` if it is news; False when it is ignored (stale or from a retired id)."""
        if snap.source in self._tombstones:
            return False
        held = self._latest.get(snap.source)
        if held is not None and held[0].seq > snap.seq:
            return False
        if snap.final:
            self._retire(snap)
        else:
            self._latest[snap.source] = (snap, self._clock())
        return True

    def _retire(self, snap: Snapshot) -> None:
        self._retired.add_cumulative(snap)
        self._tombstones.add(snap.source)
        self._latest.pop(snap.source, None)

    def totals(self) -> Totals:
        now = self._clock()
        for snap, seen in list(self._latest.values()):
            if now - seen > self._retire_after_s:
                self._retire(snap)
        kept = [snap for snap, _ in self._latest.values()]
        live = [snap for snap, seen in self._latest.values() if now - seen <= self._stale_after_s]
        return merge_totals(self._retired, kept, live)

    def sources(self) -> dict[str, float]:
        """Seconds since each kept source was last heard from (for diagnostics)."""
        now = self._clock()
        return {src: now - seen for src, (_, seen) in self._latest.items()}

    def ledgers(self) -> dict[str, dict[str, float]]:
        """Each live replica's record writer, as its latest snapshot has it: keyed by the
        replica's id (Serve's replica id), for `costgate status`."""
        now = self._clock()
        out: dict[str, dict[str, float]] = {}
        for source, (snap, seen) in self._latest.items():
            if now - seen > self._stale_after_s:
                continue
            row: dict[str, float] = {"age_s": round(now - seen, 1)}
            for key, metric in {**WRITER_STAT_METRICS, **WRITER_HEALTH_METRICS}.items():
                values = (snap.gauges if metric.kind is Kind.GAUGE else snap.counters).get(
                    metric.name
                )
                if values and () in values:
                    row[key] = float(values[()])
            out[source.split("/", 1)[0]] = row
        return out


class MetricsHub:
    """The actor's body: calls run one at a time (a sync actor), so no locking."""

    def __init__(self, stale_after_s: float = 10.0, retire_after_s: float = 600.0) -> None:
        self._state = HubState(stale_after_s, retire_after_s)

    def push(self, snap: Snapshot) -> bool:
        return self._state.push(snap)

    def render(self) -> bytes:
        return render_totals(self._state.totals())

    def totals(self) -> Totals:
        return self._state.totals()

    def sources(self) -> dict[str, float]:
        return self._state.sources()

    def ledgers(self) -> dict[str, dict[str, float]]:
        return self._state.ledgers()


@functools.cache
def _actor_class() -> Any:
    import ray

    return ray.remote(MetricsHub)


def hub_handle(app_name: str) -> Any:
    """The hub of `app_name`, created on first use. Blocking (a GCS lookup): call it in
    a thread from async code. Safe when many replicas race to create it."""
    return (
        _actor_class()
        .options(
            name=hub_name(app_name),
            namespace=HUB_NAMESPACE,
            lifetime="detached",
            get_if_exists=True,
            num_cpus=0,
            resources={_HEAD_NODE_RESOURCE: 0.001},
            # a replica may sit in a placement group: the hub must not
            scheduling_strategy="DEFAULT",
            max_restarts=-1,
            # pushes are cumulative and renders read-only: retrying either is harmless
            max_task_retries=-1,
        )
        .remote()
    )
