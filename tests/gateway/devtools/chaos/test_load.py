"""The load generator against the real sim: bounded by count and by time, every request
kept with what its client saw, a dead port counted as no answer."""

from __future__ import annotations

import time

from gateway.devtools.chaos.load import LoadRun, LoadSpec
from gateway.devtools.chaos.proxy import free_port
from gateway.devtools.sim.process import SimProcess


def test_stops_at_its_count_and_keeps_each_outcome(sim: SimProcess) -> None:
    spec = LoadSpec(requests=12, duration_s=30, rps=100, concurrency=4, stream_every=3)
    outcomes = LoadRun(sim.base_url, "sk-test", spec, "count").start().join()
    assert len(outcomes) == 12
    assert {o.status for o in outcomes} == {200}
    assert sorted(o.client_id for o in outcomes) == sorted(f"count-{i}" for i in range(12))
    assert sum(o.stream for o in outcomes) == 4  # every third one
    assert all(o.ended >= o.started for o in outcomes)


def test_stops_at_its_duration_at_its_pace(sim: SimProcess) -> None:
    spec = LoadSpec(requests=10_000, duration_s=1.0, rps=20, concurrency=4)
    t0 = time.monotonic()
    outcomes = LoadRun(sim.base_url, "sk-test", spec, "pace").start().join()
    assert time.monotonic() - t0 < 5
    assert 15 <= len(outcomes) <= 21  # 20 rps for 1 s, the first one at 0


def test_a_closed_port_is_no_answer(sim: SimProcess) -> None:
    spec = LoadSpec(requests=3, duration_s=5, rps=0, concurrency=1, timeout_s=5)
    outcomes = LoadRun(f"http://127.0.0.1:{free_port()}", "k", spec, "dead").start().join()
    assert len(outcomes) == 3
    assert all(o.status is None and o.error for o in outcomes)
