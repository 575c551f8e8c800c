"""The audit trail of live routing changes: who changed which alias of which Serve app,
from what to what, and how it ended. The routing update path writes one row per change;
the dashboard and `costgate routing history` list them.

A change is written as its intent before anything is sent (status `pending`, with the
settings version it expects to replace and the one it makes) and updated with its outcome
afterwards (`applied`, `failed`, `timed_out`, with `outcome_at`), so a change whose rollout
never finished, or whose process died, is still in the trail.

Writers of one app are serialised by `routing_change_lock`: a PostgreSQL advisory lock
keyed on the app name, held on one connection from before the pending row is written
until the outcome is. The lock, not the row, is what stops two writers: without a
migration there is no unique index to make "one pending row per app" a constraint, and
`SELECT ... FOR UPDATE` on the newest row locks nothing for an app's first change. An
advisory lock needs no row, is released by PostgreSQL itself when the holder's connection
drops (a killed CLI does not leave the app locked), and waits with `lock_timeout`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

from sqlalchemy import Connection, Engine, func, insert, select, text, update
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.orm import Session

from db.engine import engine_scope
from db.models import ROUTING_STATUSES, RoutingChange

PENDING, APPLIED, FAILED, TIMED_OUT = ROUTING_STATUSES
OUTCOMES = (APPLIED, FAILED, TIMED_OUT)
# PostgreSQL's SQLSTATE for a lock wait that ran past lock_timeout
_LOCK_NOT_AVAILABLE = "55P03"


class RoutingLockBusy(RuntimeError):
    """Another change of the same app held the lock for longer than we would wait."""


@dataclasses.dataclass(frozen=True, slots=True)
class RoutingChangeEntry:
    id: int
    changed_at: dt.datetime  # when the change was asked for (the pending row's time)
    actor: str
    app_name: str
    alias: str | None
    before: Any
    after: Any
    note: str | None
    status: str
    outcome_at: dt.datetime | None
    version_before: int | None
    version_after: int | None


def _json_default(value: Any) -> Any:
    # routing weights are Decimal: keep them exact, as pydantic's JSON mode does (strings)
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _jsonable(value: Any) -> Any:
    return None if value is None else json.loads(json.dumps(value, default=_json_default))


def _row(
    actor: str,
    app_name: str,
    alias: str | None,
    before: Any,
    after: Any,
    note: str | None,
    status: str,
    version_before: int | None,
    version_after: int | None,
) -> dict[str, Any]:
    if status not in ROUTING_STATUSES:
        raise ValueError(f"unknown routing change status {status!r}")
    return {
        "actor": actor,
        "app_name": app_name,
        "alias": alias,
        "before": _jsonable(before),
        "after": _jsonable(after),
        "note": note,
        "status": status,
        "version_before": version_before,
        "version_after": version_after,
        # an outcome known at once is dated at once; a pending one when it is settled
        "outcome_at": None if status == PENDING else func.now(),
    }


def record_routing_change(
    engine_or_url: Engine | str | None,
    actor: str,
    app_name: str,
    alias: str | None,
    before: Any,
    after: Any,
    note: str | None = None,
    *,
    status: str = APPLIED,
    version_before: int | None = None,
    version_after: int | None = None,
) -> int:
    """Append one change whose outcome is already known (or `pending`) and return its id."""
    values = _row(
        actor, app_name, alias, before, after, note, status, version_before, version_after
    )
    with engine_scope(engine_or_url) as engine, engine.begin() as conn:
        row_id = conn.execute(
            insert(RoutingChange).values(**values).returning(RoutingChange.id)
        ).scalar_one()
    return int(row_id)


def lock_key(app_name: str) -> int:
    """The advisory lock's 64-bit key for an app: stable across processes and versions
    (PostgreSQL's hashtext() is not documented to be), prefixed so that other users of
    advisory locks on the same database are unlikely to collide with it."""
    digest = hashlib.sha256(f"costgate.routing_change:{app_name}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class RoutingAudit:
    """The audit rows of one app's change, written on the connection that holds its lock.

    Each write commits at once: the pending row must be visible (and survive us) before
    the change is sent.
    """

    def __init__(self, conn: Connection, app_name: str) -> None:
        self._conn = conn
        self.app_name = app_name

    def begin(
        self,
        actor: str,
        alias: str | None,
        before: Any,
        after: Any,
        note: str | None,
        *,
        version_before: int,
        version_after: int,
    ) -> int:
        """Write the change as `pending`; return the row's id."""
        values = _row(
            actor, self.app_name, alias, before, after, note, PENDING, version_before, version_after
        )
        row_id = self._conn.execute(
            insert(RoutingChange).values(**values).returning(RoutingChange.id)
        ).scalar_one()
        self._conn.commit()
        return int(row_id)

    def settle(self, row_id: int, status: str) -> None:
        """Record the outcome of a pending change; a settled row is never rewritten."""
        if status not in OUTCOMES:
            raise ValueError(f"{status!r} is not an outcome (one of {', '.join(OUTCOMES)})")
        self._conn.execute(
            update(RoutingChange)
            .where(RoutingChange.id == row_id, RoutingChange.status == PENDING)
            .values(status=status, outcome_at=func.now())
        )
        self._conn.commit()


@contextmanager
def routing_change_lock(
    engine_or_url: Engine | str | None, app_name: str, *, wait_s: float
) -> Iterator[RoutingAudit]:
    """Hold the app's routing-change lock, waiting at most `wait_s` for it.

    Raises RoutingLockBusy when another writer still holds it then. The lock is a
    session-level advisory lock, so it outlives the commits of the rows written inside
    and is released explicitly on the way out (or by PostgreSQL when the connection dies).
    """
    key = lock_key(app_name)
    with engine_scope(engine_or_url) as engine, engine.connect() as conn:
        try:
            # lock_timeout bounds the wait for any lock, advisory ones included
            conn.execute(
                text("SELECT set_config('lock_timeout', :ms, false)"),
                {"ms": f"{max(1, round(wait_s * 1000))}ms"},
            )
            conn.execute(text("SELECT pg_advisory_lock(:key)"), {"key": key})
            conn.execute(text("SELECT set_config('lock_timeout', '0', false)"))
            conn.commit()
        except OperationalError as err:
            conn.rollback()
            if getattr(err.orig, "sqlstate", None) == _LOCK_NOT_AVAILABLE:
                raise RoutingLockBusy(
                    f"another routing change of {app_name!r} held the lock for more than "
                    f"{wait_s:g} s"
                ) from None
            raise
        try:
            yield RoutingAudit(conn, app_name)
        finally:
            try:
                conn.rollback()  # a failed write inside leaves the transaction aborted
                conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": key})
                conn.commit()
            except DBAPIError:
                # a connection we cannot unlock on must not go back to a pool still
                # holding the lock: dropping it releases the lock
                conn.invalidate()


def list_routing_changes(
    engine_or_url: Engine | str | None = None,
    *,
    app_name: str | None = None,
    alias: str | None = None,
    since: dt.datetime | None = None,
    limit: int = 100,
) -> list[RoutingChangeEntry]:
    """The newest changes first."""
    query = select(RoutingChange).order_by(RoutingChange.id.desc()).limit(limit)
    if app_name is not None:
        query = query.where(RoutingChange.app_name == app_name)
    if alias is not None:
        query = query.where(RoutingChange.alias == alias)
    if since is not None:
        query = query.where(RoutingChange.changed_at >= since)
    with engine_scope(engine_or_url) as engine, Session(engine) as session:
        rows = session.scalars(query).all()
    return [
        RoutingChangeEntry(
            id=r.id,
            changed_at=r.changed_at,
            actor=r.actor,
            app_name=r.app_name,
            alias=r.alias,
            before=r.before,
            after=r.after,
            note=r.note,
            status=r.status,
            outcome_at=r.outcome_at,
            version_before=r.version_before,
            version_after=r.version_after,
        )
        for r in rows
    ]
