"""Readiness and Serve's health check, read from a real ledger writer (a real PostgreSQL
behind a proxy we cut, real files): a database outage is neither, a spool that cannot be
written makes the replica not ready (and says why), only a dead writer fails the check
that makes Serve replace the replica."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.domain.config import default_config_path, load_config
from gateway.ledger import supervisor
from gateway.ledger.writer import RecordWriter
from gateway.replica.http_api import serve_app
from gateway.replica.ingress import Gateway
from gateway.replica.service import GatewayService, RecordSink
from tests.fixtures.database import DatabaseProxy
from tests.gateway.ledger.support import make_record, wait_until

pytestmark = pytest.mark.usefixtures("clean_ledger")


class Replica:
    """The parts of one replica that readiness reads, wired as the ingress wires them."""

    def __init__(self, writer: RecordWriter) -> None:
        self.writer = writer
        self.service = GatewayService(
            load_config(default_config_path()), sink=RecordSink(submit=writer.submit)
        )
        self.service.readiness = lambda: writer.health().reasons
        self.http = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=serve_app(self.service)), base_url="http://gw"
        )

    async def readyz(self) -> tuple[int, dict[str, Any]]:
        r = await self.http.get("/readyz")
        return r.status_code, r.json()

    async def check_health(self) -> None:
        """The deployment's own method, on these parts (no Ray needed to call it)."""
        ingress: Any = Gateway.func_or_class  # the class under serve.deployment
        await ingress.check_health(self)


@pytest.fixture
async def replica(
    database_proxy: DatabaseProxy, tmp_path: Path
) -> AsyncIterator[Callable[..., Replica]]:
    made: list[Replica] = []

    def make(spool_dir: Path | None = None, **kwargs: Any) -> Replica:
        kwargs.setdefault("flush_interval_s", 0.05)
        kwargs.setdefault("retry_max_s", 0.2)
        writer = RecordWriter(
            database_proxy.url, spool_dir=spool_dir or tmp_path / "spool", **kwargs
        )
        made.append(Replica(writer))
        return made[-1]

    yield make
    for r in made:
        await r.writer.close(timeout_s=5)
        await r.http.aclose()
        await r.service.aclose()


async def test_a_database_outage_leaves_the_replica_ready_and_healthy(
    replica: Callable[..., Replica], database_proxy: DatabaseProxy
) -> None:
    r = replica()
    await r.writer.start()
    database_proxy.block()
    for _ in range(20):
        r.writer.submit(make_record())
    await wait_until(lambda: r.writer.stats()["spooled"] == 20)
    status, body = await r.readyz()
    assert (status, body["status"]) == (200, "ready") and "reasons" not in body
    await r.check_health()  # no exception: Serve keeps the replica


async def test_a_spool_that_cannot_be_written_makes_the_replica_not_ready_and_says_why(
    replica: Callable[..., Replica], database_proxy: DatabaseProxy, tmp_path: Path
) -> None:
    (tmp_path / "state").write_text("a file where the spool's parent directory should be")
    r = replica(spool_dir=tmp_path / "state" / "spool")
    await r.writer.start()
    database_proxy.block()
    for _ in range(30):
        r.writer.submit(make_record())
    await wait_until(lambda: r.writer.stats()["spool_write_errors"] >= 1)
    s = r.writer.stats()
    assert (s["buffer_depth"], s["spooled"], s["dropped"]) == (30, 0, 0)  # kept in memory

    status, body = await r.readyz()
    assert status == 503 and body["status"] == "not_ready"
    assert body["reasons"] == ["ledger spool not writable (NotADirectoryError)"]
    assert str(tmp_path) not in str(body)  # /readyz is open: no paths
    await r.check_health()  # alive: a new replica would get the same disk

    database_proxy.unblock()
    await wait_until(lambda: r.writer.stats()["written"] == 30)


async def test_a_dead_writer_fails_readiness_and_the_health_check(
    replica: Callable[..., Replica],
) -> None:
    r = replica(retry_initial_s=0.02, retry_max_s=0.05)
    await r.writer.start()
    assert (await r.readyz())[0] == 200

    async def bug(*_: Any) -> Any:
        raise RuntimeError("injected")

    dbs: Any = r.writer._lanes.databases
    for db in dbs:
        db.write = bug  # every write fails as a bug would: the loop crashes over and over
    r.writer.submit(make_record())
    await wait_until(lambda: not r.writer.health().alive)
    status, body = await r.readyz()
    assert status == 503 and body["reasons"] == ["ledger writer not alive"]
    # it goes on restarting (and crashing) meanwhile: at least the count that made it dead
    with pytest.raises(RuntimeError, match=r"crashed (\d+) times") as failed:
        await r.check_health()
    crashes = re.search(r"crashed (\d+) times", str(failed.value))
    assert crashes is not None and int(crashes[1]) >= supervisor.CRASHES_BEFORE_DEAD

    for db in dbs:
        del db.write  # repaired: alive again, and so healthy again
    await wait_until(lambda: r.writer.health().alive)
    await r.check_health()
    assert (await r.readyz())[0] == 200
