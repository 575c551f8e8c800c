"""The control plane's own admin key, so that `costgate routing set` works out of the box.

A routing change is confirmed by asking every replica's `GET /costgate/routing`, which
wants an admin key (`gateway.replica.http_api`). `costgate up` and `costgate demo` make
sure one exists: COSTGATE_ADMIN_KEY when the operator set it (nothing is created then),
else the key kept under the state dir, else a new one, written there with mode 600. The
CLI and the dashboard read it back through `Environment.control_admin_key`.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

from db.keys import create_key, hash_key, load_active_keys
from gateway.domain.environment import ADMIN_KEY_FILE, environment

CONTROL_APP = "costgate-control"


def ensure_control_key(database_url: str, state_dir: Path) -> Path | None:
    """Make sure the control plane has a working admin key; return the file it is in.

    None when COSTGATE_ADMIN_KEY is set: the operator manages that key.
    """
    configured = environment().admin_key
    if configured is not None and configured.get_secret_value().strip():
        return None
    path = state_dir / ADMIN_KEY_FILE
    try:
        kept = path.read_text().strip()
    except OSError:
        kept = ""
    if kept and _usable(database_url, kept):
        return path
    # none yet, or revoked, expired or demoted since: a new one replaces it
    key, _ = create_key(database_url, CONTROL_APP, is_admin=True)
    _write_private(path, key)
    return path


def _usable(database_url: str, key: str) -> bool:
    info = load_active_keys(database_url).get(hash_key(key))
    if info is None or not info.is_admin:
        return False
    return info.expires_at is None or info.expires_at > dt.datetime.now(dt.UTC)


def _write_private(path: Path, secret: str) -> None:
    """Write `secret` readable by this user only, at every moment, and atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # a leftover tmp file keeps its old mode through O_CREAT
        os.write(fd, secret.encode())
    finally:
        os.close(fd)
    os.replace(tmp, path)
