"""Migrations build exactly the models' schema, on an empty database, and undo cleanly."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, make_url

import db.analytics  # noqa: F401 - the rollup tables are on Base.metadata too
import db.batches.tables  # noqa: F401 - and the batch tables
import db.quality  # noqa: F401 - the feedback tables too
import db.shared_state.provider_objects  # noqa: F401 - and the provider objects' owners
import db.shared_state.response_cache  # noqa: F401 - and the response cache's table
from db.engine import libpq_url, make_engine
from db.migrate import current_revision, downgrade, head_revision, upgrade
from db.models import ENDPOINTS, REQUEST_STATUSES, USAGE_SOURCES, Base
from gateway.domain.endpoints import Endpoint
from gateway.domain.usage_record import RequestStatus, UsageSource


@pytest.fixture
def empty_database(database_url: str) -> Iterator[str]:
    """A new, empty database on the same server as the session's test database."""
    name = f"costgate_mig_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(libpq_url(database_url), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield make_url(database_url).set(database=name).render_as_string(hide_password=False)
    with psycopg.connect(libpq_url(database_url), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _tables(url: str) -> set[str]:
    engine = make_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_upgrade_creates_every_model_table_on_an_empty_database(empty_database: str) -> None:
    assert current_revision(empty_database) is None
    upgrade(empty_database)
    assert current_revision(empty_database) == head_revision()
    assert set(Base.metadata.tables) <= _tables(empty_database)


def test_downgrade_to_base_removes_every_table_and_upgrade_works_again(
    empty_database: str,
) -> None:
    upgrade(empty_database)
    downgrade(empty_database, "base")
    assert _tables(empty_database) <= {"alembic_version"}
    assert current_revision(empty_database) is None
    upgrade(empty_database)
    assert current_revision(empty_database) == head_revision()


def test_upgrade_twice_is_a_no_op(empty_database: str) -> None:
    upgrade(empty_database)
    upgrade(empty_database)
    assert current_revision(empty_database) == head_revision()


def _not_a_partition(obj: object, name: str | None, kind: str, reflected: bool, to: object) -> bool:
    """The ledger's weekly partitions are made by its upkeep, not by the models."""
    return not (kind == "table" and reflected and to is None
                and (name or "").startswith("usage_records_"))  # fmt: skip


def test_autogenerate_finds_no_difference_between_models_and_migrations(
    database_url: str,
) -> None:
    engine = make_engine(database_url)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(
                conn,
                opts={
                    "compare_type": True,
                    "compare_server_default": True,
                    "include_object": _not_a_partition,
                },
            )
            diff = compare_metadata(context, Base.metadata)
    finally:
        engine.dispose()
    assert diff == []


def test_check_constraints_allow_exactly_the_record_vocabularies() -> None:
    assert set(REQUEST_STATUSES) == {s.value for s in RequestStatus}
    assert set(USAGE_SOURCES) == {s.value for s in UsageSource}
    assert set(ENDPOINTS) == {e.value for e in Endpoint}


def test_rows_from_before_0003_become_chat_completions(empty_database: str) -> None:
    upgrade(empty_database, "0002")
    with psycopg.connect(libpq_url(empty_database), autocommit=True) as conn:
        conn.execute(
            "INSERT INTO usage_records (request_id, started_at, ended_at, app, requested_model,"
            " stream, status, http_status, usage_source, latency_ms, attempts) VALUES"
            " (gen_random_uuid(), now(), now(), 'a', 'gpt-4.1', false, 'ok', 200,"
            " 'provider', 5, 1)"
        )
    upgrade(empty_database)
    with psycopg.connect(libpq_url(empty_database), autocommit=True) as conn:
        row = conn.execute("SELECT endpoint, cache_write_tokens FROM usage_records").fetchone()
        assert row == ("chat.completions", None)
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute("UPDATE usage_records SET endpoint = 'images'")
