"""The hub as a real detached Ray actor, fed by replicas in separate worker processes."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray

from gateway.concurrency.waits import within
from gateway.metrics.hub import HUB_NAMESPACE, hub_handle, hub_name
from gateway.metrics.replica import ReplicaMetrics, render_metrics
from tests.fixtures.exposition_reader import total
from tests.fixtures.metric_records import make_record

APP = "metrics-hub-test"
REPO = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[None]:
    if ray.is_initialized():  # another fixture's cluster: use it, leave it running
        yield
        return
    # a short path: Ray's Unix sockets live under it and have a length limit
    temp_dir = tempfile.mkdtemp(prefix="cg-mhub-", dir="/tmp")
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        _temp_dir=temp_dir,
        namespace="metrics-hub-test",
        log_to_driver=False,
    )
    try:
        yield
    finally:
        ray.shutdown()
        shutil.rmtree(temp_dir, ignore_errors=True)


@ray.remote(num_cpus=0)
class ReplicaProcess:
    """A stand-in for one ingress replica: its own process, its own ReplicaMetrics."""

    async def start(self, replica_id: str) -> None:
        self.metrics = ReplicaMetrics(replica_id, APP, push_interval_s=0.1)
        await self.metrics.start()

    def serve(self, n: int, cost: str) -> None:
        from decimal import Decimal

        for _ in range(n):
            self.metrics.observe_request(make_record(actual_cost_usd=Decimal(cost)))
        self.metrics.inflight_delta(1)

    async def stop(self) -> None:
        await self.metrics.close()


# generous: on a loaded machine a new actor's worker process takes seconds to start
CALL_TIMEOUT_S = 60.0


async def _wait_for(name: str, want: float | None = None, **match: str) -> bytes:
    """The hub's text once `name` totals `want` (any text, with no `want`), or the last
    text after a minute. A render may time out while the hub's process starts: asked
    again."""
    text = b""
    deadline = time.monotonic() + CALL_TIMEOUT_S
    while time.monotonic() < deadline:
        with contextlib.suppress(TimeoutError):
            text = await render_metrics(APP)
            if want is None or total(text, name, **match) == want:
                return text
        await asyncio.sleep(0.1)
    return text


async def _done(ref: Any) -> Any:
    # bounded: a hang here fails the test where it hung, not the suite's time limit
    return await within(ref, CALL_TIMEOUT_S)


async def test_totals_span_replica_processes_and_outlive_a_killed_replica(ray_cluster):
    # workers import this module by name: give them the repository on their path
    env = {"env_vars": {"PYTHONPATH": str(REPO)}}
    replicas = [ReplicaProcess.options(runtime_env=env).remote() for _ in range(2)]
    await asyncio.gather(*(_done(r.start.remote(f"replica-{i}")) for i, r in enumerate(replicas)))
    await _done(replicas[0].serve.remote(7, "0.10"))
    await _done(replicas[1].serve.remote(5, "0.01"))

    text = await _wait_for("costgate_requests_total", 12)
    assert total(text, "costgate_requests_total") == 12
    assert total(text, "costgate_cost_usd_total") == pytest.approx(0.75)
    assert total(text, "costgate_request_duration_seconds_count") == 12
    assert total(text, "costgate_metrics_reporting_replicas") == 2

    # one replica dies without a goodbye (as on SIGKILL or OOM): its counts stay
    ray.kill(replicas[0])
    await _done(replicas[1].serve.remote(1, "0.01"))
    text = await _wait_for("costgate_requests_total", 13)
    assert total(text, "costgate_requests_total") == 13
    assert total(text, "costgate_cost_usd_total") == pytest.approx(0.76)

    # the other shuts down gracefully: its gauges go at once, its counts stay
    await _done(replicas[1].stop.remote())
    text = await _wait_for("costgate_requests_total", 13)
    assert total(text, "costgate_requests_total") == 13
    assert total(text, "costgate_request_duration_seconds_count") == 13


async def test_every_replica_finds_the_same_named_hub(ray_cluster):
    await _wait_for("costgate_requests_total")  # any render: the hub is up
    by_name = ray.get_actor(hub_name(APP), namespace=HUB_NAMESPACE)
    ids = await asyncio.gather(*(asyncio.to_thread(hub_handle, APP) for _ in range(4)))
    assert {h._actor_id for h in ids} == {by_name._actor_id}
