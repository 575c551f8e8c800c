"""Totals rendered as Prometheus text, through prometheus_client's own writer.

A custom Collector yields metric families from merged totals, so names, escaping and
the exposition format are prometheus_client's, not ours. Every family in the catalog is
yielded, even with no sample yet: a scrape then shows HELP and TYPE for everything the
dashboards query, and a family never appears or vanishes with traffic.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.utils import floatToGoString

from gateway.metrics.catalog import ALL_METRICS, Kind, MetricDef
from gateway.metrics.snapshot import HistogramValue, Totals

__all__ = ["CONTENT_TYPE_LATEST", "render_totals"]

_MS = Decimal(1000)


class TotalsCollector(Collector):
    def __init__(self, totals: Totals) -> None:
        self._totals = totals

    def collect(self) -> Iterator[Metric]:
        for metric in ALL_METRICS:
            yield _family(metric, self._totals)


def _family(metric: MetricDef, totals: Totals) -> Metric:
    labels = list(metric.labels)
    if metric.kind is Kind.COUNTER:
        counter = CounterMetricFamily(metric.name, metric.help, labels=labels)
        for lv, v in sorted(totals.counters.get(metric.name, {}).items()):
            counter.add_metric(list(lv), float(v))
        return counter
    if metric.kind is Kind.GAUGE:
        gauge = GaugeMetricFamily(metric.name, metric.help, labels=labels)
        for lv, v in sorted(totals.gauges.get(metric.name, {}).items()):
            gauge.add_metric(list(lv), float(v))
        return gauge
    hfam = HistogramMetricFamily(metric.name, metric.help, labels=labels)
    for lv, h in sorted(totals.histograms.get(metric.name, {}).items()):
        if len(h.bucket_counts) != len(metric.buckets) + 1:
            continue  # pushed by a release with other buckets: cannot be rendered as these
        hfam.add_metric(list(lv), _cumulative_buckets(metric, h), float(Decimal(h.sum_ms) / _MS))
    return hfam


def _cumulative_buckets(metric: MetricDef, h: HistogramValue) -> list[tuple[str, float]]:
    out: list[tuple[str, float]] = []
    running = 0
    # prometheus_client ships py.typed but leaves floatToGoString unannotated (returns str)
    bounds = [floatToGoString(b) for b in metric.buckets] + ["+Inf"]  # type: ignore[no-untyped-call]
    for bound, n in zip(bounds, h.bucket_counts, strict=True):
        running += n
        out.append((bound, float(running)))
    return out


def render_totals(totals: Totals) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(TotalsCollector(totals))
    return generate_latest(registry)
