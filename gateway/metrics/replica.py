"""Gateway metrics: cheap counting in each replica, totals over all replicas at /metrics.

Why this shape. Each Ray Serve replica is its own process, so a prometheus_client
registry inside one replica would count only that replica, and scraping replicas one by
one is impossible behind Serve's proxy (any replica answers). So:

1. Each replica counts in plain Python (`ReplicaMetrics` over a `SeriesStore`): a few
   dict updates per request, exact (Decimal dollars, integer milliseconds), no I/O, no
   hop: nothing on the request path waits for metrics.
2. About once a second (only when something changed, else a heartbeat every few
   seconds), and once more on graceful shutdown, the replica pushes a snapshot of its
   *cumulative* values to one detached named Ray actor, the hub
   (`gateway.metrics.hub`). Cumulative snapshots make pushes idempotent: a lost push
   costs freshness, never correctness.
3. `GET /metrics`, on whichever replica Serve picks, asks the hub to add up the latest
   snapshot of every replica that ever reported (so counters of replaced replicas still
   count and totals stay monotonic) plus the gauges of live replicas, and returns the
   text prometheus_client renders. Totals lag the truth by at most one push interval,
   which is far below any scrape interval.

Ray's own per-node metrics (`ray.serve.metrics`, the metrics export port) are another
source for Ray internals; ours are the gateway's business figures.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
import weakref
from decimal import Decimal
from typing import Protocol

from gateway.concurrency.waits import cancel_until_done, within
from gateway.domain.endpoints import Endpoint
from gateway.domain.environment import environment
from gateway.domain.usage_record import RequestStatus, UsageRecord
from gateway.metrics.catalog import (
    BASELINE_COST_USD,
    BREAKER_STATE,
    CACHE_STAT_SERIES,
    COST_USD,
    FALLBACKS,
    IN_FLIGHT,
    LIST_COST_USD,
    NEGATIVE_SAVINGS_USD,
    REQUEST_DURATION,
    REQUEST_ERRORS,
    REQUESTS,
    RETRIES,
    ROUTING_WEIGHT,
    SAVINGS_USD,
    TOKENS,
    TTFT,
    UNPRICED_REQUESTS,
    UPSTREAM_ATTEMPTS,
    WRITER_HEALTH_METRICS,
    WRITER_STAT_METRICS,
    Kind,
    MetricDef,
)
from gateway.metrics.exposition import CONTENT_TYPE_LATEST, render_totals
from gateway.metrics.hub import HubState, hub_handle
from gateway.metrics.labels import LabelGuard, status_class
from gateway.metrics.snapshot import Labels, Number, SeriesStore, Snapshot

__all__ = [
    "CONTENT_TYPE_LATEST",
    "HubClient",
    "LocalHubClient",
    "RayHubClient",
    "ReplicaMetrics",
    "render_metrics",
]

log = logging.getLogger(__name__)

# "0"/"false"/"no" turns the per-app label off (apps are configured, but there may be many)
APP_LABEL_ENV = "COSTGATE_METRICS_APP_LABEL"


class HubClient(Protocol):
    async def push(self, snap: Snapshot) -> bool: ...

    async def render(self) -> bytes: ...


class RayHubClient:
    """Talks to the hub actor; finds it again (or re-creates it) after any failure."""

    def __init__(self, app_name: str, timeout_s: float = 5.0) -> None:
        self._app_name = app_name
        self._timeout_s = timeout_s
        self._handle: object | None = None

    async def _call(self, method: str, *args: object) -> object:
        if self._handle is None:
            import ray

            # creating an actor would start a whole local Ray cluster in a process that
            # has none (a test, a script): refuse instead
            if not ray.is_initialized():
                raise RuntimeError("Ray is not initialized: no metrics hub to talk to")
        try:
            # the lookup too is bounded: the GCS may be slow to answer, or gone
            if self._handle is None:
                self._handle = await within(
                    asyncio.to_thread(hub_handle, self._app_name), self._timeout_s
                )
            ref = getattr(self._handle, method).remote(*args)
            return await within(asyncio.wrap_future(ref.future()), self._timeout_s)
        except Exception:
            self._handle = None  # the actor may have moved or died: look it up next time
            raise

    async def push(self, snap: Snapshot) -> bool:
        return bool(await self._call("push", snap))

    async def render(self) -> bytes:
        out = await self._call("render")
        if not isinstance(out, bytes):
            raise TypeError(f"the metrics hub rendered {type(out).__name__}, not bytes")
        return out

    async def ledgers(self) -> dict[str, dict[str, float]]:
        out = await self._call("ledgers")
        if not isinstance(out, dict):
            raise TypeError(f"the metrics hub answered {type(out).__name__}, not a dict")
        return out


class LocalHubClient:
    """An in-process hub: for one-process runs and tests of the replica side."""

    def __init__(self, state: HubState | None = None) -> None:
        self.state = state or HubState()

    async def push(self, snap: Snapshot) -> bool:
        return self.state.push(snap)

    async def render(self) -> bytes:
        return render_totals(self.state.totals())


def _app_label_default() -> bool:
    return environment().metrics_app_label


# live instances per process, so render_metrics can push this replica's news first
_ACTIVE: weakref.WeakSet[ReplicaMetrics] = weakref.WeakSet()


class ReplicaMetrics:
    def __init__(
        self,
        replica_id: str,
        app_name: str,
        *,
        per_app_labels: bool | None = None,
        hub: HubClient | None = None,
        push_interval_s: float = 1.0,
        heartbeat_s: float = 5.0,
    ) -> None:
        self.app_name = app_name
        # a fresh suffix per process: a restarted replica reusing its id never
        # overwrites the counts its predecessor reported
        self.source = f"{replica_id}/{uuid.uuid4().hex[:12]}"
        self._per_app = _app_label_default() if per_app_labels is None else per_app_labels
        self._hub: HubClient = hub or RayHubClient(app_name)
        self._interval = push_interval_s
        self._heartbeat = heartbeat_s
        self._store = SeriesStore()
        self._labels = LabelGuard()
        self._weights_set_at = 0.0
        self._pushed_version = -1
        self._pushed_at = float("-inf")
        self._task: asyncio.Task[None] | None = None
        self._last_warning = float("-inf")

    # --- the request path: in-memory only ---------------------------------------------

    def observe_request(self, record: UsageRecord) -> None:
        lbl = self._labels.value
        model = lbl("model", record.model)
        provider = lbl("provider", record.provider)
        req = (
            model,
            provider,
            lbl("alias", record.alias),
            lbl("app", record.app) if self._per_app else "",
        )
        sc = status_class(record)
        endpoint = lbl("endpoint", record.endpoint.value)
        incs: list[tuple[MetricDef, Labels, Number]] = [(REQUESTS, (*req, endpoint, sc), 1)]
        if record.status in (RequestStatus.CLIENT_ERROR, RequestStatus.UPSTREAM_ERROR):
            reason = lbl("reason", record.error_class or record.status.value)
            incs.append((REQUEST_ERRORS, (model, provider, reason), 1))
        for kind, n in (
            ("prompt", record.prompt_tokens),
            ("cached_prompt", record.cached_prompt_tokens),
            ("completion", record.completion_tokens),
            ("reasoning", record.reasoning_tokens),
        ):
            if n:
                incs.append((TOKENS, (*req, kind), n))
        actual, listed = record.actual_cost_usd, record.list_cost_usd
        if actual is not None:
            incs.append((COST_USD, req, actual))
        elif record.status in (RequestStatus.OK, RequestStatus.CANCELLED):
            incs.append((UNPRICED_REQUESTS, (model, provider), 1))
        if listed is not None:
            incs.append((LIST_COST_USD, req, listed))
        if record.baseline_cost_usd is not None:
            incs.append((BASELINE_COST_USD, req, record.baseline_cost_usd))
        if actual is not None and listed is not None:
            saved = listed - actual
            if saved > 0:
                incs.append((SAVINGS_USD, req, saved))
            elif saved < 0:
                incs.append((NEGATIVE_SAVINGS_USD, req, -saved))
        # a batch line's "duration" is its batch's hours in a queue: not a latency
        observations: list[tuple[MetricDef, tuple[str, ...], int]] = (
            [] if record.endpoint is Endpoint.BATCH
            else [(REQUEST_DURATION, (model, provider, sc), record.latency_ms)])  # fmt: skip
        if record.ttft_ms is not None:
            observations.append((TTFT, (model, provider), record.ttft_ms))
        self._store.add_all(incs, observations)

    def observe_attempt(self, model: str, provider: str, outcome: str) -> None:
        lbl = self._labels.value
        self._store.inc(
            UPSTREAM_ATTEMPTS,
            (lbl("model", model), lbl("provider", provider), lbl("outcome", outcome)),
        )

    def observe_retry(self, model: str, provider: str, reason: str) -> None:
        lbl = self._labels.value
        self._store.inc(
            RETRIES, (lbl("model", model), lbl("provider", provider), lbl("reason", reason))
        )

    def observe_fallback(self, from_model: str, to_model: str) -> None:
        lbl = self._labels.value
        self._store.inc(FALLBACKS, (lbl("model", from_model), lbl("model", to_model)))

    def set_breaker_state(self, provider: str, model: str, state: int) -> None:
        lbl = self._labels.value
        self._store.set_gauge(
            BREAKER_STATE, (lbl("provider", provider), lbl("model", model)), state
        )

    def set_routing_weights(self, weights: dict[str, dict[str, Decimal]]) -> None:
        lbl = self._labels.value
        series: dict[tuple[str, ...], int | Decimal] = {
            (lbl("alias", alias), lbl("model", model)): Decimal(w)
            for alias, by_model in weights.items()
            for model, w in by_model.items()
        }
        self._weights_set_at = time.time()
        self._store.replace_gauges(ROUTING_WEIGHT, series)

    def inflight_delta(self, delta: int) -> None:
        self._store.add_gauge(IN_FLIGHT, (), delta)

    def set_cache_stats(self, stats: dict[str, int]) -> None:
        """The response cache's cumulative counts (`ResponseCache.stats()`)."""
        for key, value in stats.items():
            series = CACHE_STAT_SERIES.get(key)
            if series is None:
                continue
            metric, labels = series
            if metric.kind is Kind.COUNTER:
                self._store.set_counter(metric, labels, value)
            else:
                self._store.set_gauge(metric, labels, value)

    def set_writer_stats(self, stats: dict[str, int]) -> None:
        for key, value in stats.items():
            metric = WRITER_STAT_METRICS.get(key) or WRITER_HEALTH_METRICS.get(key)
            if metric is None:
                continue  # a stat the catalog does not export (yet)
            if metric.kind is Kind.COUNTER:
                self._store.set_counter(metric, (), value)
            else:
                self._store.set_gauge(metric, (), value)

    # --- pushing to the hub --------------------------------------------------------------

    async def start(self) -> None:
        _ACTIVE.add(self)
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"metrics-push {self.source}")

    async def close(self) -> None:
        _ACTIVE.discard(self)
        if self._task is not None:
            await cancel_until_done(self._task)
            self._task = None
        try:
            await self.push(final=True)
        except Exception as err:  # shutting down: say so, but never block the shutdown
            log.warning("metrics: final push failed: %s", type(err).__name__)

    async def push(self, *, final: bool = False, force: bool = False) -> None:
        """Send a snapshot if something changed, a heartbeat is due, or `force`/`final`."""
        version = self._store.version
        now = time.monotonic()
        if (
            not (final or force)
            and version == self._pushed_version
            and now - self._pushed_at < self._heartbeat
        ):
            return
        snap = self._store.snapshot(self.source, time.time(), final, self._weights_set_at)
        await self._hub.push(snap)
        self._pushed_version, self._pushed_at = version, now

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            try:
                await self.push()
            except Exception as err:
                # the hub may be restarting; the next push carries everything anyway
                if time.monotonic() - self._last_warning > 60:
                    self._last_warning = time.monotonic()
                    log.warning("metrics: push to the hub failed: %r", err)


_render_clients: dict[str, RayHubClient] = {}


async def render_metrics(app_name: str, hub: HubClient | None = None) -> bytes:
    """The Prometheus text of the totals over every replica (media type CONTENT_TYPE_LATEST).

    This replica's own news is pushed first, so its requests are never a push behind.
    Raises if the hub cannot be reached: the route should answer 503.
    """
    for rm in list(_ACTIVE):
        if rm.app_name == app_name:
            try:
                await rm.push(force=True)
            except Exception as err:
                log.warning("metrics: push before render failed: %r", err)
    if hub is None:
        hub = _render_clients.setdefault(app_name, RayHubClient(app_name))
    return await hub.render()


async def replica_ledgers(app_name: str) -> dict[str, dict[str, float]]:
    """Each live replica's record writer as the hub last heard of it (`costgate status`)."""
    client = _render_clients.setdefault(app_name, RayHubClient(app_name))
    return await client.ledgers()
