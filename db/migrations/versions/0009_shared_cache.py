"""the response cache shared by every replica and node, in the ledger's database

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-04 11:30:00

An UNLOGGED table (no WAL: a crash empties it, which a cache may be; writes cost a
fraction of a logged table's) keyed by the cache key, with the entry's bytes and when it
expires. Replicas read live rows only and delete expired ones now and then
(`gateway/replica/cache/postgres_store.py`, docs/CACHE.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        "CREATE UNLOGGED TABLE response_cache ("
        " key text NOT NULL,"
        " value bytea NOT NULL,"
        " expires_at timestamptz NOT NULL,"
        " CONSTRAINT pk_response_cache PRIMARY KEY (key))"
    )
    op.execute("CREATE INDEX ix_response_cache_expires_at ON response_cache (expires_at)")


def downgrade() -> None:
    op.execute("DROP TABLE response_cache")
