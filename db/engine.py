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


def read_database_url() -> str:
    """Where the ledger's readers go: DATABASE_READ_URL (a streaming replica) if set, else
    the primary (`database_url()`). Writers, budgets and keys always use the primary."""
    env = environment().database_read_url_value
    return normalize_url(env) if env else database_url()


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


# seconds the data is behind the primary: NULL on a primary; 0 on a replica that has
# replayed everything it received (an idle primary sends nothing, which is not lag),
# else the age of the last transaction it replayed
DATA_LAG_SQL = """
SELECT CASE WHEN NOT pg_is_in_recovery() THEN NULL
            WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0
            ELSE greatest(0, extract(epoch FROM now() - pg_last_xact_replay_timestamp()))
       END
"""


def data_lag_s(engine: Engine) -> float | None:
    """How far behind the primary the data `engine` reads is, in seconds (None: it is the
    primary). Pages and the usage API say it when they read a replica."""
    from sqlalchemy import text

    with engine.connect() as conn:
        lag = conn.execute(text(DATA_LAG_SQL)).scalar_one()
    return None if lag is None else float(lag)
