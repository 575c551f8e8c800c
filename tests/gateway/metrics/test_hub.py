from decimal import Decimal

from gateway.metrics.catalog import COST_USD, IN_FLIGHT, REQUESTS
from gateway.metrics.hub import HubState
from gateway.metrics.snapshot import SeriesStore, Snapshot

REQ = ("m", "p", "", "app", "2xx")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _snap(store: SeriesStore, source: str, final: bool = False) -> Snapshot:
    return store.snapshot(source, 0.0, final, 0.0)


def _requests(hub: HubState) -> int:
    return int(hub.totals().counters.get(REQUESTS.name, {}).get(REQ, 0))


def test_repeated_cumulative_pushes_are_not_double_counted():
    hub, store = HubState(), SeriesStore()
    store.inc(REQUESTS, REQ, 5)
    hub.push(_snap(store, "r1"))
    hub.push(_snap(store, "r1"))
    store.inc(REQUESTS, REQ, 2)
    hub.push(_snap(store, "r1"))
    assert _requests(hub) == 7


def test_an_older_snapshot_arriving_late_is_ignored():
    hub, store = HubState(), SeriesStore()
    store.inc(REQUESTS, REQ)
    old = _snap(store, "r1")
    store.inc(REQUESTS, REQ)
    assert hub.push(_snap(store, "r1"))
    assert not hub.push(old)
    assert _requests(hub) == 2


def test_counts_of_a_replica_that_shut_down_still_count_and_its_gauges_do_not():
    hub = HubState()
    leaving, staying = SeriesStore(), SeriesStore()
    leaving.inc(REQUESTS, REQ, 10)
    leaving.inc(COST_USD, REQ[:4], Decimal("0.25"))
    leaving.add_gauge(IN_FLIGHT, (), 3)
    staying.inc(REQUESTS, REQ, 1)
    staying.add_gauge(IN_FLIGHT, (), 1)
    hub.push(_snap(leaving, "a"))
    hub.push(_snap(staying, "b"))
    hub.push(_snap(leaving, "a", final=True))
    totals = hub.totals()
    assert totals.counters[REQUESTS.name][REQ] == 11
    assert totals.counters[COST_USD.name][REQ[:4]] == Decimal("0.25")
    assert totals.gauges[IN_FLIGHT.name][()] == 1
    assert set(hub.sources()) == {"b"}


def test_a_push_after_the_final_one_is_not_counted_twice():
    hub, store = HubState(), SeriesStore()
    store.inc(REQUESTS, REQ, 4)
    hub.push(_snap(store, "a", final=True))
    assert not hub.push(_snap(store, "a"))
    assert _requests(hub) == 4


def test_a_silent_replica_loses_its_gauges_then_is_retired_with_its_counts_kept():
    clock = Clock()
    hub = HubState(stale_after_s=10, retire_after_s=100, clock=clock)
    store = SeriesStore()
    store.inc(REQUESTS, REQ, 3)
    store.add_gauge(IN_FLIGHT, (), 2)
    hub.push(_snap(store, "a"))
    clock.now = 5
    assert hub.totals().gauges[IN_FLIGHT.name][()] == 2
    clock.now = 11
    assert IN_FLIGHT.name not in hub.totals().gauges
    assert _requests(hub) == 3
    clock.now = 101
    assert _requests(hub) == 3
    assert hub.sources() == {}
    assert not hub.push(_snap(store, "a"))  # retired for good


def test_a_restarted_replica_with_a_new_source_id_adds_to_its_predecessor():
    hub = HubState()
    before, after = SeriesStore(), SeriesStore()
    before.inc(REQUESTS, REQ, 8)
    hub.push(_snap(before, "replica-1/aaaa"))
    after.inc(REQUESTS, REQ, 1)
    hub.push(_snap(after, "replica-1/bbbb"))
    assert _requests(hub) == 9


def test_each_live_replicas_ledger_writer_is_reported_by_its_replica_id():
    from gateway.metrics.catalog import WRITER_ALIVE, WRITER_DROPPED, WRITER_SPOOL

    clock = Clock()
    hub = HubState(stale_after_s=10.0, clock=clock)
    sick, healthy, gone = SeriesStore(), SeriesStore(), SeriesStore()
    sick.set_gauge(WRITER_ALIVE, (), 0)
    sick.set_gauge(WRITER_SPOOL, (), 12)
    sick.set_counter(WRITER_DROPPED, (), 3)
    healthy.set_gauge(WRITER_ALIVE, (), 1)
    gone.set_gauge(WRITER_ALIVE, (), 1)
    hub.push(_snap(gone, "r-gone/aaaa"))
    clock.now = 20.0  # r-gone has not been heard from since: not live
    hub.push(_snap(sick, "r-sick/bbbb"))
    hub.push(_snap(healthy, "r-ok/cccc"))
    ledgers = hub.ledgers()
    assert set(ledgers) == {"r-sick", "r-ok"}
    assert ledgers["r-sick"]["alive"] == 0 and ledgers["r-sick"]["spool_depth"] == 12
    assert ledgers["r-sick"]["dropped"] == 3
    assert ledgers["r-ok"]["alive"] == 1
