"""An embedded PostgreSQL, started from the `pgserver` wheel, when no DATABASE_URL is set.

It is a real PostgreSQL 16 with its data under the state directory and a Unix socket
in the same directory (no TCP port to collide with). It keeps running after the process
that started it exits, so Ray replicas, the dashboard and the CLI all share one server;
`stop_embedded()` (used by `costgate down`) stops it. Starting it is idempotent and
safe across processes: pgserver serialises starts with a file lock and reuses a server
already running on the same data directory.
"""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path
from typing import Any

from gateway.domain.environment import environment

log = logging.getLogger(__name__)


def state_dir() -> Path:
    """Where costgate keeps local state: $COSTGATE_STATE_DIR, else `.state` in the checkout."""
    return environment().state_dir


def pgdata_dir(base: Path | None = None) -> Path:
    return (base or state_dir()) / "pg"


def ensure_embedded(pgdata: Path | None = None) -> str:
    """Start (or reuse) the embedded server and return its libpq URL (Unix socket)."""
    pgdata = pgdata or pgdata_dir()
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    pgserver = _pgserver()
    # cleanup_mode=None: the server outlives this process (other processes share it)
    server = pgserver.get_server(pgdata, cleanup_mode=None)
    url: str = server.get_uri()
    log.info("embedded PostgreSQL at %s", pgdata)
    return url


def _pgserver() -> Any:
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset; pgserver only keeps a lock there
        warnings.simplefilter("ignore")
        import pgserver
        import pgserver.utils

    return pgserver


def embedded_running(pgdata: Path | None = None) -> bool:
    info = _pgserver().utils.PostmasterInfo.read_from_pgdata(pgdata or pgdata_dir())
    return info is not None and info.is_running()


def stop_embedded(pgdata: Path | None = None) -> bool:
    """Stop the embedded server if it runs; True if it was running. Data stays on disk."""
    pgdata = pgdata or pgdata_dir()
    if not embedded_running(pgdata):
        return False
    _pgserver()
    from pgserver._commands import pg_ctl  # type: ignore[attr-defined]  # made at import

    # as root, pgserver runs postgres as its own unprivileged system user
    user = "pgserver" if os.name == "posix" and os.geteuid() == 0 else None
    pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=user, timeout=30)
    return True
