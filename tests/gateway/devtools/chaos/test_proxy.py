"""The cuttable path to PostgreSQL, against the test database: cut, refused, restored."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from db.engine import libpq_url
from gateway.devtools.chaos.proxy import DatabaseProxy


@pytest.fixture
def proxy(database_url: str) -> Iterator[DatabaseProxy]:
    p = DatabaseProxy(database_url).start()
    yield p
    p.stop()


def test_block_resets_open_sessions_and_refuses_new_ones_until_unblocked(
    proxy: DatabaseProxy,
) -> None:
    url = libpq_url(proxy.url)
    with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
        proxy.block()
        with pytest.raises(psycopg.OperationalError):
            conn.execute("SELECT 1")
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(url, connect_timeout=2)
    proxy.unblock()
    with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
        assert conn.execute("SELECT 2").fetchone() == (2,)
