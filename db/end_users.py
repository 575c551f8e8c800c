"""Erasing an end user from the ledger (`costgate users forget`; docs/ATTRIBUTION.md).

The rows stay, because they are the company's spend: only the end user they name is
replaced by a fresh tombstone (`forgotten:<hex>`, `gateway.attribution.identity`), in the
raw rows, in the daily rollups by end user and by session, and in the budget leases held
for that end user; the end user's shared rate-limit buckets (a minute's state) go. The
rows still group together, every total stays what it was, and nothing in the database
says whose they were; the audit row records who erased, when and how many rows, never
the id.

Renaming in place is safe for the rollups: the rollup triggers fire on INSERT, DELETE and
TRUNCATE of `usage_records`, never on UPDATE, so the app and day totals do not move; and
the tombstone is new, so a renamed rollup row cannot collide with another's key.
"""

from __future__ import annotations

import dataclasses

from sqlalchemy import Connection, Engine, delete, func, insert, text, update
from sqlalchemy.exc import DBAPIError

from db.analytics.attribution_tables import (
    end_user_erasures,
    usage_rollup_session_daily,
    usage_rollup_user_daily,
    usage_rollup_user_kind_daily,
)
from db.engine import engine_scope
from db.models import BudgetLease, LimitBucket, UsageRow
from gateway.attribution.identity import tombstone

# a writer folding the same end user's rows at the same moment: try again from the start
_RETRYABLE = frozenset({"40001", "40P01"})  # serialization failure, deadlock
_ATTEMPTS = 3


@dataclasses.dataclass(frozen=True, slots=True)
class Erasure:
    erasure_id: int  # the audit row's id
    tombstone: str  # what the rows carry now
    ledger_rows: int
    rollup_rows: int  # by end user and by session
    lease_rows: int  # budget leases held for the end user
    limit_buckets: int = 0  # the end user's shared rate-limit buckets, deleted


def forget_end_user(engine_or_url: Engine | str | None, stored_id: str, *, actor: str) -> Erasure:
    """Replace `stored_id` (the end user as stored: plain, `hmac:…`) by a new tombstone
    everywhere the ledger holds it, in one transaction, and audit it.

    The transaction is REPEATABLE READ, so the raw rows and the rollups are renamed as of
    one snapshot: a row a writer commits meanwhile either stays out of both (it keeps the
    id, as a row written after the erasure would) or makes this transaction fail with a
    serialization error. Then it starts again, this time holding the tables it writes
    against writes before its snapshot is taken, so that the ledger writers and the
    replicas' syncs wait (briefly) rather than an erasure failing again and again under a
    steady stream of that end user's requests.
    """
    if not stored_id:
        raise ValueError("an end user id is required")
    if not actor.strip():
        raise ValueError("an actor (who erases) is required")
    with engine_scope(engine_or_url) as engine:
        for attempt in range(1, _ATTEMPTS + 1):
            try:
                with engine.connect().execution_options(
                    isolation_level="REPEATABLE READ"
                ) as conn, conn.begin():  # fmt: skip
                    if attempt > 1:
                        _hold_tables(conn)
                    return _erase(conn, stored_id, actor.strip())
            except DBAPIError as err:
                if attempt == _ATTEMPTS or getattr(err.orig, "sqlstate", None) not in _RETRYABLE:
                    raise
    raise AssertionError("unreachable")  # the loop returns or raises


# the rollups that name end users, in the order writers fold into them
_ROLLUPS = (usage_rollup_user_daily, usage_rollup_session_daily, usage_rollup_user_kind_daily)


def _hold_tables(conn: Connection) -> None:
    """Against writes (reads go on): the rollups writers fold into inside their own
    transaction, so no row naming an end user commits meanwhile, and the leases and
    buckets replicas sync. Taken before any query, so the snapshot follows them."""
    for table in _ROLLUPS:  # the writers' order
        conn.execute(text(f"LOCK TABLE {table.name} IN EXCLUSIVE MODE"))
    for model in (BudgetLease, LimitBucket):
        conn.execute(text(f"LOCK TABLE {model.__tablename__} IN EXCLUSIVE MODE"))


def _erase(conn: Connection, stored_id: str, actor: str) -> Erasure:
    dead = tombstone()
    # WHERE end_user = … reads the partial index ix_usage_records_end_user_started_at
    ledger = conn.execute(
        update(UsageRow).where(UsageRow.end_user == stored_id).values(end_user=dead)
    ).rowcount
    rollups = 0
    for table in _ROLLUPS:
        rollups += conn.execute(
            update(table).where(table.c.end_user == stored_id).values(end_user=dead)
        ).rowcount
    leases = conn.execute(
        update(BudgetLease).where(BudgetLease.subject == stored_id).values(subject=dead)
    ).rowcount
    buckets = 0
    key_part = func.split_part(LimitBucket.name, ":", 2)
    for unit in ("rpm", "tpm"):
        # gateway.quota.guard names them key:<key id>:user:<end user>:<unit>, the key id
        # (a UUID, or None) without a colon: matched exactly, whatever the id holds
        tail = f":user:{stored_id}:{unit}"
        buckets += conn.execute(
            delete(LimitBucket).where(
                LimitBucket.name.startswith("key:", autoescape=True),
                LimitBucket.name == func.concat("key:", key_part, tail),
            )
        ).rowcount
    erasure_id = conn.execute(
        insert(end_user_erasures)
        .values(actor=actor, tombstone=dead, ledger_rows=ledger, rollup_rows=rollups)
        .returning(end_user_erasures.c.id)
    ).scalar_one()
    return Erasure(int(erasure_id), dead, ledger, rollups, leases, buckets)
