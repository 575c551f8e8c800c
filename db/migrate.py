"""Alembic, driven from code: `costgate migrate`, `costgate up` and the test fixtures call this.

The Alembic configuration is built here rather than read from an ini file, so the
migrations run the same from any working directory and from an installed package.
`db/alembic.ini` exists only for developers' `alembic revision --autogenerate`.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from db.engine import database_url, make_engine, normalize_url

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


def alembic_config(url: str | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    # ConfigParser interpolation: a literal % in a password must be doubled
    cfg.set_main_option("sqlalchemy.url", normalize_url(url or database_url()).replace("%", "%%"))
    return cfg


def upgrade(url: str | None = None, revision: str = "head") -> None:
    command.upgrade(alembic_config(url), revision)


def migrated_database_url() -> str:
    """The ledger's URL (the embedded server started if needed), migrated to head."""
    url = database_url()
    upgrade(url)
    return url


def downgrade(url: str | None = None, revision: str = "base") -> None:
    command.downgrade(alembic_config(url), revision)


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config("postgresql://unused/")).get_current_head()


def current_revision(url: str | None = None) -> str | None:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()
