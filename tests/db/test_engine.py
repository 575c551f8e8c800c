"""Which database: DATABASE_URL in any spelling, or the embedded server under the state dir."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from db.embedded import embedded_running, pgdata_dir, stop_embedded
from db.engine import database_url, libpq_url, normalize_url


@pytest.mark.parametrize(
    "given",
    [
        "postgresql://u:p@h:5432/d",
        "postgres://u:p@h:5432/d",
        "postgresql+psycopg2://u:p@h:5432/d",
        "postgresql+psycopg://u:p@h:5432/d",
    ],
)
def test_any_postgresql_spelling_becomes_the_psycopg3_dialect(given: str) -> None:
    assert normalize_url(given) == "postgresql+psycopg://u:p@h:5432/d"
    assert libpq_url(given) == "postgresql://u:p@h:5432/d"


def test_a_non_postgresql_url_is_refused() -> None:
    with pytest.raises(ValueError, match="PostgreSQL"):
        normalize_url("sqlite:///x.db")


def test_database_url_env_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgres://someone@db.example:6543/ledger")
    assert database_url() == "postgresql+psycopg://someone@db.example:6543/ledger"


@pytest.fixture
def state_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    # outside pytest's tmp root, which pytest keeps at mode 0700 (see tests.fixtures.database)
    base = Path(tempfile.mkdtemp(prefix="costgate-test-state-"))
    base.chmod(0o755)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("COSTGATE_STATE_DIR", str(base))
    yield base
    stop_embedded(base / "pg")
    shutil.rmtree(base, ignore_errors=True)


def test_without_database_url_an_embedded_server_starts_under_the_state_dir_and_is_reused(
    state_dir: Path,
) -> None:
    url = database_url()
    assert pgdata_dir() == state_dir / "pg"
    assert embedded_running(state_dir / "pg")
    with psycopg.connect(libpq_url(url)) as conn:
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert pid is not None
    assert database_url() == url  # a second call reuses the running server
    assert stop_embedded(state_dir / "pg") is True
    assert not embedded_running(state_dir / "pg")
    assert (state_dir / "pg" / "PG_VERSION").exists()  # the data stays
