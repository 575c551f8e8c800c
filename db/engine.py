"""Which database, and an engine for it.

`DATABASE_URL` names a PostgreSQL server; without it, the embedded server under the state
directory (`db.embedded`) is started or reused. Either way the same SQL runs on a real
PostgreSQL through psycopg 3: there is no SQLite branch.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, create_engine

from gateway.domain.environment import environment

_SCHEMES = ("postgresql+psycopg2://", "postgresql+psycopg://", "postgresql://", "postgres://")


def normalize_url(url: str) -> str:
    """Any PostgreSQL URL spelling -> SQLAlchemy's psycopg 3 dialect (`postgresql+psycopg://`)."""
    for scheme in _SCHEMES:
        if url.startswith(scheme):
            return "postgresql+psycopg://" + url[len(scheme) :]
    raise ValueError("DATABASE_URL must be a PostgreSQL URL (postgresql://...)")


def libpq_url(url: str) -> str:
    """The same URL as libpq/psycopg.connect() wants it (no SQLAlchemy driver suffix)."""
    return "postgresql://" + normalize_url(url)[len("postgresql+psycopg://") :]


def database_url() -> str:
    """DATABASE_URL normalised to psycopg 3, or the embedded server's URL (started if needed)."""
    env = environment().database_url_value
    if env:
        return normalize_url(env)
    from db.embedded import ensure_embedded

    return normalize_url(ensure_embedded())


def make_engine(url: str | None = None, **kwargs: Any) -> Engine:
    """A SQLAlchemy engine; `pool_pre_ping` so a restarted server costs one retry, not an error."""
    kwargs.setdefault("pool_pre_ping", True)
    return create_engine(normalize_url(url or database_url()), **kwargs)


@contextmanager
def engine_scope(engine_or_url: Engine | str | None = None) -> Iterator[Engine]:
    """Use a caller's engine as is, or make one for a URL (or the default database) and
    dispose of it afterwards: the store functions accept either."""
    if isinstance(engine_or_url, Engine):
        yield engine_or_url
        return
    engine = make_engine(engine_or_url)
    try:
        yield engine
    finally:
        engine.dispose()
