"""Reads and writes of the batch tables. Every read names the app: another app's file or
batch is not found, exactly as one that does not exist (a 404, never a 403)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy import Engine
from sqlalchemy.dialects.postgresql import insert

from db.batches.tables import batch_files, batch_leases, batch_lines, batches
from db.models import UsageRow

# the statuses a poll still moves forward (OpenAI's names; Anthropic's map onto them)
_USAGE = cast(sa.Table, UsageRow.__table__)
OPEN_STATUSES = ("validating", "in_progress", "finalizing", "cancelling")


def add_file(engine: Engine, row: Mapping[str, Any]) -> None:
    with engine.begin() as conn:
        conn.execute(insert(batch_files).values(dict(row)).on_conflict_do_nothing())


def find_file(engine: Engine, file_id: str, app: str) -> dict[str, Any] | None:
    query = sa.select(batch_files).where(batch_files.c.id == file_id, batch_files.c.app == app)
    with engine.connect() as conn:
        found = conn.execute(query).mappings().first()
    return None if found is None else dict(found)


def delete_file(engine: Engine, file_id: str, app: str) -> bool:
    with engine.begin() as conn:
        gone = conn.execute(
            sa.delete(batch_files).where(batch_files.c.id == file_id, batch_files.c.app == app)
        )
    return gone.rowcount > 0


def add_batch(engine: Engine, row: Mapping[str, Any]) -> None:
    with engine.begin() as conn:
        conn.execute(insert(batches).values(dict(row)))


def find_batch(engine: Engine, batch_id: str, app: str | None) -> dict[str, Any] | None:
    """A batch by id, as `app` may see it (None: whoever owns it, for the poller)."""
    query = sa.select(batches).where(batches.c.id == batch_id)
    if app is not None:
        query = query.where(batches.c.app == app)
    with engine.connect() as conn:
        found = conn.execute(query).mappings().first()
    return None if found is None else dict(found)


def list_batches(engine: Engine, app: str, api: str, after: str | None, limit: int
                 ) -> list[dict[str, Any]]:
    """The app's batches of one API, newest first, from after the batch `after`."""
    query = sa.select(batches).where(batches.c.app == app, batches.c.api == api)
    if after is not None:
        at = sa.select(batches.c.created_at).where(
            batches.c.id == after, batches.c.app == app).scalar_subquery()  # fmt: skip
        query = query.where(batches.c.created_at < at)
    query = query.order_by(batches.c.created_at.desc(), batches.c.id.desc()).limit(limit)
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(query).mappings()]


def open_batches(engine: Engine) -> list[dict[str, Any]]:
    query = sa.select(batches).where(batches.c.status.in_(OPEN_STATUSES))
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(query.order_by(batches.c.created_at)).mappings()]


def ended_batches(engine: Engine, ids: Sequence[str]) -> dict[str, Decimal]:
    """Of these batches, the ones that ended, with what they billed (for settling)."""
    if not ids:
        return {}
    query = sa.select(batches.c.id, batches.c.billed_usd).where(
        batches.c.id.in_(list(ids)), batches.c.status.not_in(OPEN_STATUSES))  # fmt: skip
    with engine.connect() as conn:
        return {r.id: Decimal(r.billed_usd or 0) for r in conn.execute(query)}


def update_open_batch(engine: Engine, batch_id: str, values: Mapping[str, Any]) -> bool:
    """Change a batch that is still open (a status seen upstream, a cancellation asked)."""
    stmt = sa.update(batches).where(batches.c.id == batch_id,
                                    batches.c.status.in_(OPEN_STATUSES)).values(dict(values))
    with engine.begin() as conn:
        return conn.execute(stmt).rowcount > 0


def take_lease(engine: Engine, name: str, holder: str, ttl_s: float) -> bool:
    """Hold the lease `name` for `ttl_s` more seconds if it is free, lapsed or ours."""
    until = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=ttl_s)
    stmt = insert(batch_leases).values(name=name, holder=holder, expires_at=until)
    upsert = stmt.on_conflict_do_update(
        index_elements=["name"],
        set_={"holder": holder, "expires_at": until},
        where=(batch_leases.c.holder == holder) | (batch_leases.c.expires_at < sa.func.now()),
    ).returning(batch_leases.c.holder)
    with engine.begin() as conn:
        return conn.execute(upsert).first() is not None


def finish_batch(
    engine: Engine,
    batch_id: str,
    ledger_rows: Sequence[Mapping[str, Any]],
    line_ids: Sequence[Mapping[str, Any]],
    files: Sequence[Mapping[str, Any]],
    values: Mapping[str, Any],
) -> bool:
    """A batch's end, exactly once: its ledger rows, which row is which line, its result
    files and its final state, in one transaction under the batch row's lock. False: it
    had ended already (another replica, or an earlier round, wrote it); nothing changed."""
    with engine.begin() as conn:
        status = conn.execute(
            sa.select(batches.c.status).where(batches.c.id == batch_id).with_for_update()
        ).scalar_one_or_none()
        if status not in OPEN_STATUSES:
            return False
        if ledger_rows:
            # idempotent by the ledger's key too (its request id and start, the partition
            # key: docs/ROLLUPS.md): a row can never be written twice
            conn.execute(insert(_USAGE).values(list(ledger_rows)).on_conflict_do_nothing(
                index_elements=["request_id", "started_at"]))
            conn.execute(insert(batch_lines).values(list(line_ids)).on_conflict_do_nothing())
        if files:
            conn.execute(insert(batch_files).values(list(files)).on_conflict_do_nothing())
        conn.execute(sa.update(batches).where(batches.c.id == batch_id).values(dict(values)))
    return True
