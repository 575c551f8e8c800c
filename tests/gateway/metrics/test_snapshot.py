from decimal import Decimal

from gateway.metrics.catalog import (
    BREAKER_REPLICAS,
    BREAKER_STATE,
    COST_USD,
    IN_FLIGHT,
    REPORTING_REPLICAS,
    REQUEST_DURATION,
    REQUESTS,
    ROUTING_WEIGHT,
)
from gateway.metrics.snapshot import HistogramValue, SeriesStore, Totals, merge_totals


def _store_with(requests: int, cost: str, inflight: int) -> SeriesStore:
    store = SeriesStore()
    for _ in range(requests):
        store.inc(REQUESTS, ("m", "p", "", "app", "2xx"))
        store.inc(COST_USD, ("m", "p", "", "app"), Decimal(cost))
    store.add_gauge(IN_FLIGHT, (), inflight)
    return store


def test_counters_of_every_source_add_up_exactly():
    a = _store_with(3, "0.1", 1).snapshot("a/1", 0.0, False, 0.0)
    b = _store_with(4, "0.2", 2).snapshot("b/1", 0.0, False, 0.0)
    totals = merge_totals(Totals(), [a, b], [a, b])
    assert totals.counters[REQUESTS.name][("m", "p", "", "app", "2xx")] == 7
    # 3 × 0.1 + 4 × 0.2 in Decimal: exactly 1.1, no float drift
    assert totals.counters[COST_USD.name][("m", "p", "", "app")] == Decimal("1.1")


def test_gauges_count_only_live_sources_but_counters_count_all():
    a = _store_with(3, "0.1", 5).snapshot("a/1", 0.0, False, 0.0)
    b = _store_with(4, "0.2", 2).snapshot("b/1", 0.0, False, 0.0)
    totals = merge_totals(Totals(), [a, b], [b])
    assert totals.counters[REQUESTS.name][("m", "p", "", "app", "2xx")] == 7
    assert totals.gauges[IN_FLIGHT.name][()] == 2
    assert totals.gauges[REPORTING_REPLICAS.name][()] == 1


def test_histogram_buckets_are_inclusive_upper_bounds():
    store = SeriesStore()
    labels = ("m", "p", "2xx")
    for ms in (50, 51, 100, 120_000, 120_001):
        store.observe_ms(REQUEST_DURATION, labels, ms)
    h = store.snapshot("s", 0.0, False, 0.0).histograms[REQUEST_DURATION.name][labels]
    assert h.count == 5
    assert h.sum_ms == 50 + 51 + 100 + 120_000 + 120_001
    assert h.bucket_counts[0] == 1  # le=0.05 holds 50 ms exactly
    assert h.bucket_counts[1] == 2  # le=0.1 holds 51 and 100
    assert h.bucket_counts[-2] == 1  # le=120 holds 120 s
    assert h.bucket_counts[-1] == 1  # +Inf holds the rest


def test_histograms_merge_bucket_by_bucket():
    one = HistogramValue((1, 0, 2), 3, 30)
    two = HistogramValue((0, 1, 1), 2, 20)
    assert one.plus(two) == HistogramValue((1, 1, 3), 5, 50)


def test_snapshot_is_a_copy_that_later_counting_does_not_change():
    store = _store_with(1, "1", 0)
    snap = store.snapshot("s", 0.0, False, 0.0)
    store.inc(REQUESTS, ("m", "p", "", "app", "2xx"))
    assert snap.counters[REQUESTS.name][("m", "p", "", "app", "2xx")] == 1
    assert store.snapshot("s", 0.0, False, 0.0).seq > snap.seq


def test_an_open_breaker_on_any_live_replica_wins_and_states_are_counted():
    snaps = []
    for i, state in enumerate((0, 2, 1)):
        store = SeriesStore()
        store.set_gauge(BREAKER_STATE, ("openai", "gpt-4.1"), state)
        snaps.append(store.snapshot(f"r{i}", 0.0, False, 0.0))
    totals = merge_totals(Totals(), snaps, snaps)
    assert totals.gauges[BREAKER_STATE.name][("openai", "gpt-4.1")] == 1
    per_state = totals.gauges[BREAKER_REPLICAS.name]
    assert per_state[("openai", "gpt-4.1", "open")] == 1
    assert per_state[("openai", "gpt-4.1", "half_open")] == 1
    assert per_state[("openai", "gpt-4.1", "closed")] == 1
    # without the open one, half-open is the most severe
    totals = merge_totals(Totals(), snaps[:2], snaps[:2])
    assert totals.gauges[BREAKER_STATE.name][("openai", "gpt-4.1")] == 2


def test_routing_weights_come_from_the_replica_that_received_them_last():
    old, new = SeriesStore(), SeriesStore()
    old.replace_gauges(ROUTING_WEIGHT, {("auto", "a"): Decimal(60), ("auto", "b"): Decimal(40)})
    new.replace_gauges(ROUTING_WEIGHT, {("auto", "a"): Decimal(0), ("auto", "b"): Decimal(100)})
    snaps = [new.snapshot("new", 0.0, False, 20.0), old.snapshot("old", 0.0, False, 10.0)]
    totals = merge_totals(Totals(), snaps, snaps)
    assert totals.gauges[ROUTING_WEIGHT.name] == {("auto", "a"): 0, ("auto", "b"): 100}
