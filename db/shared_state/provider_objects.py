"""Provider objects bound to the app that created them (`gateway.replica.objects`).

One row per object id an upstream answer created through the gateway: a stored
response, a container. Written once, before the answer leaves; read by id when a request
names one. The table is on `Base.metadata` for migrations and their check, kept here
because it is not part of the ledger's models.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import sqlalchemy as sa
from sqlalchemy import Engine
from sqlalchemy.dialects.postgresql import insert

from db.models import Base


class Named(Protocol):
    @property
    def kind(self) -> str: ...

    @property
    def object_id(self) -> str: ...


provider_objects = sa.Table(
    "provider_objects",
    Base.metadata,
    sa.Column("object_id", sa.Text(), primary_key=True),
    sa.Column("kind", sa.Text(), nullable=False),
    sa.Column("app", sa.Text(), nullable=False),
    sa.Column(
        "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.text("now()")
    ),
)


class PostgresObjectStore:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def record(self, app: str, refs: Sequence[Named]) -> None:
        rows = [{"object_id": r.object_id, "kind": r.kind, "app": app} for r in refs]
        # the first app to create an id keeps it: a second answer naming the same id (a
        # replay, an upstream reusing one) never moves it to another app
        stmt = insert(provider_objects).values(rows).on_conflict_do_nothing()
        with self.engine.begin() as conn:
            conn.execute(stmt)

    def owners(self, ids: Sequence[str]) -> dict[str, str]:
        query = sa.select(provider_objects.c.object_id, provider_objects.c.app).where(
            provider_objects.c.object_id.in_(list(ids))
        )
        with self.engine.connect() as conn:
            return {row.object_id: row.app for row in conn.execute(query)}
