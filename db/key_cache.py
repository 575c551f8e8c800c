"""The gateway keys' last known set, kept on local disk beside the spool.

Replicas read the active keys from PostgreSQL (`db.keys.load_active_keys`) and keep them
in memory through an outage. A replica that starts during one (a redeploy, a replaced
replica) has no set yet, so it could authenticate nobody; it starts from this file, the
set as the last successful load of any replica on this state dir saw it: no staler than
the outage. A running replica that meets a key it does not know while PostgreSQL is away
takes the file too, when it is newer than its own last load (a key created just before
the outage, which another replica saw). Only hashes of the keys are in it, never a key,
and the file is readable by this user only.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import logging
import uuid
from pathlib import Path
from typing import Any

from db.keys import KeyInfo
from db.private_files import write_private

log = logging.getLogger(__name__)

KEY_CACHE_FILE = "gateway-keys.json"
_VERSION = 1


def encode_keys(keys: dict[str, KeyInfo]) -> bytes:
    rows = {}
    for digest, info in sorted(keys.items()):
        row: dict[str, Any] = {}
        for f in dataclasses.fields(info):
            value = getattr(info, f.name)
            if isinstance(value, uuid.UUID):
                value = str(value)
            elif isinstance(value, dt.datetime):
                value = value.isoformat()
            elif isinstance(value, tuple):
                value = list(value)
            row[f.name] = value
        rows[digest] = row
    return json.dumps({"version": _VERSION, "keys": rows}, sort_keys=True).encode()


def decode_keys(data: bytes) -> dict[str, KeyInfo]:
    """Raises ValueError (or a subclass) when `data` is not a key set of this version."""
    doc = json.loads(data)
    if not isinstance(doc, dict) or doc.get("version") != _VERSION:
        raise ValueError("not a key cache of this version")
    known = {f.name for f in dataclasses.fields(KeyInfo)}
    out = {}
    for digest, row in doc["keys"].items():
        kw = {k: v for k, v in row.items() if k in known}  # a field since dropped: ignored
        kw["key_id"] = uuid.UUID(kw["key_id"])
        if kw.get("expires_at") is not None:
            kw["expires_at"] = dt.datetime.fromisoformat(kw["expires_at"])
        for listed in ("allowed_models", "allowed_tag_keys"):  # tuples, as JSON lists
            if kw.get(listed) is not None:
                kw[listed] = tuple(kw[listed])
        out[str(digest)] = KeyInfo(**kw)
    return out


class KeyCache:
    """One replica's view of the file: written when the set it loaded changed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._written: str | None = None  # digest of what this process last wrote

    def save(self, keys: dict[str, KeyInfo]) -> None:
        data = encode_keys(keys)
        digest = hashlib.sha256(data).hexdigest()
        if digest == self._written:
            return
        try:
            write_private(self.path, data)
        except OSError as err:
            # a cache: the keys work without it; only a start during an outage needs it
            log.warning("cannot keep the gateway keys' cache: %s", type(err).__name__)
            return
        self._written = digest

    def load(self, newer_than: float | None = None) -> dict[str, KeyInfo] | None:
        """The last known set, or None (no file, one that cannot be read, or one written
        no later than `newer_than`, a Unix time: not news to whoever loaded then)."""
        try:
            if newer_than is not None and self.path.stat().st_mtime <= newer_than:
                return None
            return decode_keys(self.path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as err:
            log.warning("gateway keys' cache unreadable: %s", type(err).__name__)
            return None
