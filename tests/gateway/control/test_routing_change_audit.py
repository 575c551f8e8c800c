"""A routing change's audit row, from `pending` before the PUT to its outcome after it,
and the compare-and-swap that refuses a change made for a version no longer live.

Serve's REST API is the in-memory FakeDashboard (httpx.MockTransport); the rows and the
lock are in the test PostgreSQL, as in production.
"""

from __future__ import annotations

import threading
from decimal import Decimal

import pytest
from sqlalchemy import text
from sqlalchemy.pool import NullPool

from db.engine import make_engine
from db.routing_audit import list_routing_changes, lock_key, routing_change_lock
from gateway.control.declarative import RoutingUpdateError
from gateway.control.routing_update import RoutingConflict
from gateway.domain.config import Config, default_config_path, load_config
from tests.gateway.control.test_routing_update_logic import (
    FakeDashboard,
    apply,
    instance,
    set_auto,
)

pytestmark = pytest.mark.usefixtures("clean_ledger")


@pytest.fixture(scope="module")
def cfg() -> Config:
    return load_config(default_config_path())


SHIFT = set_auto({"deepseek-v3.2": Decimal(1), "claude-sonnet-4.5": Decimal(3)})


def test_the_row_is_pending_when_the_put_arrives_and_applied_once_rolled_out(
    cfg, database_url
) -> None:
    fake = FakeDashboard(instance(cfg))
    seen_at_put = []
    fake.on_put = lambda f: seen_at_put.extend(list_routing_changes(database_url))
    result, rows = apply(fake, SHIFT, cfg, database_url, actor="ops:ana")

    (at_put,) = seen_at_put
    assert (at_put.status, at_put.version_before, at_put.version_after) == ("pending", 1, 2)
    assert at_put.outcome_at is None and at_put.actor == "ops:ana"
    (row,) = rows
    assert row.id == at_put.id == result.audit_id
    assert (row.status, row.version_before, row.version_after) == ("applied", 1, 2)
    assert row.outcome_at is not None and row.outcome_at >= row.changed_at


def test_concurrent_writers_do_not_interleave_read_check_and_put(cfg, database_url) -> None:
    """Both read version 1; the lock makes the second re-read after the first one's PUT,
    so it sees version 2 and is refused. Without the lock its re-read would land while
    the first PUT is still in flight (the PUT below waits for it), and both would PUT."""
    fake = FakeDashboard(instance(cfg))
    both_read = threading.Barrier(2, timeout=10)
    both_reread = threading.Event()
    reads: dict[str, int] = {}
    rereads: list[str] = []

    def on_get(f: FakeDashboard) -> None:
        name = threading.current_thread().name
        reads[name] = reads.get(name, 0) + 1
        if reads[name] == 1:
            both_read.wait()  # neither goes on before both have built their change on v1
        elif reads[name] == 2:
            rereads.append(name)
            if len(rereads) == 2:
                both_reread.set()

    def on_put(f: FakeDashboard) -> None:
        # the first PUT waits (bounded) for the other writer's re-read, which the lock
        # must hold back until this change is done
        both_reread.wait(timeout=1.5)

    fake.on_get, fake.on_put = on_get, on_put
    outcomes: dict[str, object] = {}

    def writer(name: str) -> None:
        try:
            outcomes[name] = apply(fake, SHIFT, cfg, database_url, actor=name)[0].after.version
        except RoutingConflict as err:
            outcomes[name] = err

    threads = [threading.Thread(target=writer, args=(n,), name=n) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(fake.puts) == 1, outcomes
    assert sorted(type(v).__name__ for v in outcomes.values()) == ["RoutingConflict", "int"]
    rows = list_routing_changes(database_url)
    assert sorted((r.status, r.version_before, r.version_after) for r in rows) == [
        ("applied", 1, 2),
        ("failed", 1, 2),
    ]


def test_a_writer_that_cannot_get_the_lock_is_refused_unsent_with_a_failed_row(
    cfg, database_url
) -> None:
    fake = FakeDashboard(instance(cfg))
    with (
        routing_change_lock(database_url, "costgate", wait_s=1),
        pytest.raises(RoutingConflict, match="held the lock.*nothing was sent"),
    ):
        apply(fake, SHIFT, cfg, database_url, timeout_s=0.3)
    assert fake.puts == []
    (row,) = list_routing_changes(database_url)
    assert (row.status, row.version_before, row.version_after) == ("failed", 1, 2)
    # the lock of another app is another lock
    with routing_change_lock(database_url, "other-app", wait_s=1):
        assert apply(fake, SHIFT, cfg, database_url, timeout_s=0.3)[0].after.version == 2


def test_a_rollout_never_confirmed_is_timed_out(cfg, database_url) -> None:
    fake = FakeDashboard(instance(cfg))
    fake.takes_puts = False  # Serve answers the PUT, its controller never takes it
    with pytest.raises(RoutingUpdateError, match="not every replica confirmed it"):
        apply(fake, SHIFT, cfg, database_url, timeout_s=0.5)
    assert len(fake.puts) == 1
    (row,) = list_routing_changes(database_url)
    assert row.status == "timed_out" and row.outcome_at is not None


def test_a_put_serve_refuses_is_failed(cfg, database_url) -> None:
    fake = FakeDashboard(instance(cfg))
    fake.put_status = 500
    with pytest.raises(RoutingUpdateError, match="HTTP 500"):
        apply(fake, SHIFT, cfg, database_url)
    (row,) = list_routing_changes(database_url)
    assert row.status == "failed"


def test_a_deployment_that_fails_on_the_new_config_is_failed(cfg, database_url) -> None:
    fake = FakeDashboard(instance(cfg))

    def deploy_fails(f: FakeDashboard) -> None:
        if f.puts:
            gateway = f.state["applications"]["costgate"]["deployments"]["Gateway"]
            gateway["status"], gateway["message"] = "DEPLOY_FAILED", "reconfigure raised"

    fake.on_get = deploy_fails
    with pytest.raises(RoutingUpdateError, match="DEPLOY_FAILED"):
        apply(fake, SHIFT, cfg, database_url)
    (row,) = list_routing_changes(database_url)
    assert row.status == "failed"


def test_without_the_audit_trail_nothing_is_sent(cfg) -> None:
    fake = FakeDashboard(instance(cfg))
    # a port nothing listens on: the database is away
    unreachable = "postgresql+psycopg://postgres@127.0.0.1:9/postgres?connect_timeout=2"
    with pytest.raises(RoutingUpdateError, match="nothing was sent"):
        apply(fake, SHIFT, cfg, unreachable)
    assert fake.puts == []


def test_the_lock_is_released_when_its_holder_is_gone(cfg, database_url) -> None:
    # a writer killed mid-change: PostgreSQL drops its session and, with it, the lock
    holder = make_engine(database_url, poolclass=NullPool)
    try:
        conn = holder.connect()
        conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": lock_key("costgate")})
        conn.commit()
        conn.invalidate()  # the connection closes without unlocking
    finally:
        holder.dispose()
    fake = FakeDashboard(instance(cfg))
    assert apply(fake, SHIFT, cfg, database_url, timeout_s=2)[0].after.version == 2
