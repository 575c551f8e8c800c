"""Alembic environment: the target metadata is `db.models`; the URL comes from the config
built by `db.migrate` (or DATABASE_URL / the embedded server when run by the alembic CLI)."""

from __future__ import annotations

from alembic import context
from sqlalchemy import text

import db.analytics  # noqa: F401 - registers the rollup tables on Base.metadata
import db.batches.tables  # noqa: F401 - and the batch tables
import db.quality  # noqa: F401 - and the feedback tables
import db.shared_state.provider_objects  # noqa: F401 - and the provider objects' owners
from db.engine import database_url, make_engine
from db.models import Base

target_metadata = Base.metadata

# Any constant works: it only has to be the same for every process migrating this database,
# so that two `costgate up` runs at once apply each migration once.
MIGRATION_LOCK_KEY = 7_236_128_001


def run_migrations_offline() -> None:
    context.configure(
        url=context.config.get_main_option("sqlalchemy.url") or database_url(),
        target_metadata=target_metadata,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    engine = make_engine(context.config.get_main_option("sqlalchemy.url") or None)
    try:
        with engine.connect() as connection:
            context.configure(connection=connection, target_metadata=target_metadata)
            with context.begin_transaction():
                connection.execute(
                    text("SELECT pg_advisory_xact_lock(:k)"), {"k": MIGRATION_LOCK_KEY}
                )
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
