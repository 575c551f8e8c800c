"""The response cache's table, shared by every replica and node (migration 0009).

UNLOGGED: no WAL, so a write costs a fraction of a logged table's and a crash of the
server empties it, which is what a cache may do. Importing this module registers the
table on `db.models.Base.metadata` (the migrations test compares them); the replicas'
store (`gateway/replica/cache/postgres_store.py`) reads and writes it with the SQL below.
"""

from __future__ import annotations

from sqlalchemy import Column, DateTime, Index, LargeBinary, Table, Text

from db.models import Base

response_cache = Table(
    "response_cache",
    Base.metadata,
    Column("key", Text, primary_key=True),
    Column("value", LargeBinary, nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Index("ix_response_cache_expires_at", "expires_at"),
    prefixes=["UNLOGGED"],
)

# live entries among some keys (a batch of lookups: one round trip)
# each live entry with the seconds it has left (a replica's LRU keeps it that long)
LOOKUP_SQL = (
    "SELECT key, value, extract(epoch FROM expires_at - now())::float8"
    " FROM response_cache WHERE key = ANY(%b) AND expires_at > now()"
)
# a batch of stores; a key stored twice in one batch keeps the last (ON CONFLICT cannot
# touch a row twice in one statement, so the batch is deduplicated before). The keys are
# announced on CHANNEL (a fingerprint and the seconds left each) when the statement
# commits: every replica's index learns that the table holds them. 256 keys fit in
# NOTIFY's 8,000 bytes (a batch holds at most 256)
CHANNEL = "costgate_response_cache"
STORE_SQL = (
    "WITH stored AS (INSERT INTO response_cache (key, value, expires_at)"
    " SELECT k, v, now() + make_interval(secs => t)"
    " FROM unnest(%b::text[], %b::bytea[], %b::float8[]) AS s(k, v, t)"
    " ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at"
    " RETURNING right(key, 16) || ':' || ceil(extract(epoch FROM expires_at - now())) AS a)"
    f" SELECT pg_notify('{CHANNEL}', string_agg(a, ',')) FROM stored"
)
# what a replica's index loads when it starts listening: the live keys' fingerprints,
# at most a number of them (one more than it keeps says it would overflow)
LIVE_KEYS_SQL = (
    "SELECT right(key, 16), extract(epoch FROM expires_at - now())::float8"
    " FROM response_cache WHERE expires_at > now() LIMIT %s"
)
# when more are live than a replica's index holds: how long the last of them lives
LAST_EXPIRY_SQL = "SELECT extract(epoch FROM max(expires_at) - now())::float8 FROM response_cache"
# expired entries, a bounded number at a time (a replica runs it every PRUNE_EVERY_S)
PRUNE_SQL = (
    "DELETE FROM response_cache WHERE key IN (SELECT key FROM response_cache"
    " WHERE expires_at <= now() LIMIT %s)"
)
