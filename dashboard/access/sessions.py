"""Signed, expiring sign-in cookies, and the server-side sessions behind them.

A sign-in opens a session: a random id whose record (the user's name, the expiry) is a
file under `$COSTGATE_STATE_DIR/dashboard-sessions/`, named by the id's SHA-256 so that
listing the folder yields no usable cookie (files 600, folder 700). The browser keeps
the cookie `costgate_session=v1.<name>.<id>.<expiry>.<signature>`, signed with
HMAC-SHA256 under the dashboard secret. A cookie counts only while its signature holds,
it has not expired, and its session record still exists with the same name and expiry:
signing out deletes the record, so a copied cookie stops working at once, in every
dashboard process that shares the state dir. Nothing is trusted from the cookie alone; a
lost state dir signs everybody out rather than in. The record is bound to the user's
password as configured at sign-in (an HMAC of its hash under the secret, never the hash):
a changed password ends every session opened with the old one.

The secret is `COSTGATE_DASHBOARD_SECRET` (32 characters or more) or, unset, 32 random
bytes made once into `$COSTGATE_STATE_DIR/dashboard-secret` (mode 600, refused if others
may read it).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import dataclasses
import hashlib
import hmac
import json
import os
import secrets
import time
from collections.abc import Callable
from pathlib import Path

from dashboard.auth import Permission, role_allows
from gateway.domain.environment import Environment, environment

COOKIE_NAME = "costgate_session"
SECRET_FILE = "dashboard-secret"
SESSIONS_DIR = "dashboard-sessions"
SECRET_MIN_CHARS = 32
_VERSION = "v1"


class SessionConfigError(ValueError):
    """The secret or the session folder cannot be used; the message never shows a secret."""


@dataclasses.dataclass(frozen=True)
class SessionUser:
    """Who a browser session is signed in as: a snapshot, re-checked on every run."""

    name: str
    role: str
    team: str | None = None
    session_id: str = dataclasses.field(default="", repr=False)

    def can(self, permission: Permission) -> bool:
        return role_allows(self.role, permission)


@dataclasses.dataclass(frozen=True)
class OpenedSession:
    session_id: str = dataclasses.field(repr=False)
    cookie: str = dataclasses.field(repr=False)  # the cookie's value
    max_age_s: int


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class SessionStore:
    def __init__(
        self,
        folder: Path,
        secret: bytes,
        ttl_s: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.folder = folder
        self._secret = secret
        self.ttl_s = ttl_s
        self._clock = clock

    @classmethod
    def from_environment(cls, env: Environment | None = None) -> SessionStore:
        env = env or environment()
        return cls(
            env.state_dir / SESSIONS_DIR, load_secret(env), env.dashboard_session_hours * 3600
        )

    def _sign(self, name: str, session_id: str, expires: int) -> str:
        message = f"{_VERSION}|{name}|{session_id}|{expires}".encode()
        return _b64(hmac.new(self._secret, message, hashlib.sha256).digest())

    def _record(self, session_id: str) -> Path:
        return self.folder / f"{hashlib.sha256(session_id.encode()).hexdigest()}.json"

    def _binding(self, credential: str) -> str:
        return hmac.new(self._secret, b"credential|" + credential.encode(),
                        hashlib.sha256).hexdigest()  # fmt: skip

    def open(self, name: str, credential: str) -> OpenedSession:
        """A new session for `name`, bound to `credential` (the user's configured password
        hash), recorded; its cookie value for the browser."""
        self._prune()
        session_id = secrets.token_urlsafe(32)
        expires = int(self._clock() + self.ttl_s)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            self.folder.chmod(0o700)
            path = self._record(session_id)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as out:
                json.dump({"name": name, "expires": expires,
                           "bound": self._binding(credential)}, out)  # fmt: skip
            tmp.replace(path)
        except OSError as err:
            raise SessionConfigError(
                f"cannot record a dashboard session under {self.folder}: {err.strerror}"
            ) from None
        signature = self._sign(name, session_id, expires)
        cookie = ".".join((_VERSION, _b64(name.encode()), session_id, str(expires), signature))
        return OpenedSession(session_id, cookie, int(self.ttl_s))

    def resolve(self, cookie: str) -> tuple[str, str] | None:
        """(name, session id) of a cookie that is signed, unexpired and still open."""
        parts = cookie.strip().split(".")
        if len(parts) != 5 or parts[0] != _VERSION or not parts[3].isdigit():
            return None
        try:
            name = _unb64(parts[1]).decode()
        except (binascii.Error, UnicodeDecodeError, ValueError):
            return None
        session_id, expires = parts[2], int(parts[3])
        # the signature first: a forged cookie costs no file lookup
        if not hmac.compare_digest(self._sign(name, session_id, expires), parts[4]):
            return None
        if not self.is_live(session_id, name, expires):
            return None
        return name, session_id

    def is_live(
        self,
        session_id: str,
        name: str,
        expires: int | None = None,
        credential: str | None = None,
    ) -> bool:
        """The session is recorded for `name` (with `expires`, and bound to `credential`,
        when given) and unexpired."""
        if not session_id:
            return False
        path = self._record(session_id)
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            return False
        if not isinstance(record, dict) or record.get("name") != name:
            return False
        if expires is not None and record.get("expires") != expires:
            return False
        bound = record.get("bound")
        if credential is not None and not (
            isinstance(bound, str) and hmac.compare_digest(bound, self._binding(credential))
        ):
            return False
        if not isinstance(record.get("expires"), int) or record["expires"] <= self._clock():
            with contextlib.suppress(OSError):
                path.unlink()
            return False
        return True

    def close(self, session_id: str) -> None:
        """End the session: its cookie, wherever it was copied, no longer signs anyone in."""
        if session_id:
            with contextlib.suppress(FileNotFoundError):
                self._record(session_id).unlink()

    def _prune(self) -> None:
        """Delete expired records (a sign-out deletes its own; expiry leaves the rest)."""
        now = self._clock()
        for path in self.folder.glob("*.json"):
            try:
                expires = json.loads(path.read_text()).get("expires")
            except (OSError, ValueError, AttributeError):
                continue
            if not isinstance(expires, int) or expires <= now:
                with contextlib.suppress(OSError):
                    path.unlink()


def load_secret(env: Environment) -> bytes:
    """`COSTGATE_DASHBOARD_SECRET`, else the state dir's secret file, made on first use."""
    if env.dashboard_secret is not None:
        value = env.dashboard_secret.get_secret_value().strip()
        if len(value) < SECRET_MIN_CHARS:
            raise SessionConfigError(
                f"COSTGATE_DASHBOARD_SECRET is shorter than {SECRET_MIN_CHARS} characters: use "
                'a random one, e.g. python -c "import secrets; print(secrets.token_hex(32))"'
            )
        return value.encode()
    return _secret_file(env.state_dir / SECRET_FILE)


def _secret_file(path: Path) -> bytes:
    try:
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(secrets.token_hex(32))
            try:
                # a hard link appears whole or not at all: two processes starting at once
                # agree on the first one's secret
                os.link(tmp, path)
            except FileExistsError:
                pass
            finally:
                tmp.unlink()
        mode = path.stat().st_mode
        if mode & 0o077:
            raise SessionConfigError(
                f"{path} may be read by other users (mode {mode & 0o777:o}): chmod 600 it"
            )
        value = path.read_text().strip()
    except OSError as err:
        raise SessionConfigError(f"cannot use {path}: {err.strerror}") from None
    if len(value) < SECRET_MIN_CHARS:
        raise SessionConfigError(f"{path} holds fewer than {SECRET_MIN_CHARS} characters")
    return value.encode()
