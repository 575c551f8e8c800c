"""The audit trail of live routing changes: who changed which alias of which Serve app,
from what to what. The routing update path writes one row per change; the dashboard
lists them."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from decimal import Decimal
from typing import Any

from sqlalchemy import Engine, insert, select
from sqlalchemy.orm import Session

from db.engine import engine_scope
from db.models import RoutingChange


@dataclasses.dataclass(frozen=True, slots=True)
class RoutingChangeEntry:
    id: int
    changed_at: dt.datetime
    actor: str
    app_name: str
    alias: str | None
    before: Any
    after: Any
    note: str | None


def _json_default(value: Any) -> Any:
    # routing weights are Decimal: keep them exact, as pydantic's JSON mode does (strings)
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _jsonable(value: Any) -> Any:
    return None if value is None else json.loads(json.dumps(value, default=_json_default))


def record_routing_change(
    engine_or_url: Engine | str | None,
    actor: str,
    app_name: str,
    alias: str | None,
    before: Any,
    after: Any,
    note: str | None = None,
) -> int:
    """Append one change and return its id."""
    with engine_scope(engine_or_url) as engine, engine.begin() as conn:
        row_id = conn.execute(
            insert(RoutingChange)
            .values(
                actor=actor,
                app_name=app_name,
                alias=alias,
                before=_jsonable(before),
                after=_jsonable(after),
                note=note,
            )
            .returning(RoutingChange.id)
        ).scalar_one()
    return int(row_id)


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
        )
        for r in rows
    ]
