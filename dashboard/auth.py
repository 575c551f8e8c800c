"""Dashboard users and roles, from configuration only (never from the repository).

Users come from `COSTGATE_DASHBOARD_USERS` ("alice:ops:<hash>,bob:viewer:<hash>") and/or
a file named by `COSTGATE_DASHBOARD_USERS_FILE` (one `name:role:hash` per line, `#`
comments). A hash is `pbkdf2_sha256$<iterations>$<salt hex>$<digest hex>` (what
`costgate dashboard hash-password` prints) or, for quick setups, a bare SHA-256 hex
digest of the password. Roles: `viewer` sees everything; `ops` may also change routing.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import secrets
from collections.abc import Mapping
from pathlib import Path

from gateway.domain.environment import Environment, environment

USERS_ENV = "COSTGATE_DASHBOARD_USERS"
USERS_FILE_ENV = "COSTGATE_DASHBOARD_USERS_FILE"
ROLES = ("viewer", "ops")
PBKDF2_ITERATIONS = 200_000


class AuthConfigError(ValueError):
    """A users entry that cannot be used; the message names it, never a hash or password."""


@dataclasses.dataclass(frozen=True)
class User:
    name: str
    role: str
    password_hash: str = dataclasses.field(repr=False)

    @property
    def can_edit_routing(self) -> bool:
        return self.role == "ops"


def hash_password(password: str, iterations: int = PBKDF2_ITERATIONS) -> str:
    salt = secrets.token_bytes(16)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    return f"pbkdf2_sha256${iterations}${salt.hex()}${digest.hex()}"


def verify_password(password: str, stored: str) -> bool:
    if stored.startswith("pbkdf2_sha256$"):
        try:
            _, iterations, salt, digest = stored.split("$")
            computed = hashlib.pbkdf2_hmac(
                "sha256", password.encode(), bytes.fromhex(salt), int(iterations)
            )
        except ValueError:
            return False
        return hmac.compare_digest(computed.hex(), digest.lower())
    computed_hex = hashlib.sha256(password.encode()).hexdigest()
    return hmac.compare_digest(computed_hex, stored.lower())


def parse_users(entries: list[str], source: str) -> dict[str, User]:
    users: dict[str, User] = {}
    for i, raw in enumerate(entries, start=1):
        entry = raw.strip()
        if not entry or entry.startswith("#"):
            continue
        parts = entry.split(":", 2)
        if len(parts) != 3 or not all(parts):
            raise AuthConfigError(f"{source} entry {i}: expected name:role:hash")
        name, role, stored = (p.strip() for p in parts)
        if role not in ROLES:
            raise AuthConfigError(
                f"{source} entry {i} ({name}): role {role!r} is not one of {', '.join(ROLES)}"
            )
        if not _looks_like_hash(stored):
            raise AuthConfigError(
                f"{source} entry {i} ({name}): not a password hash "
                "(use `costgate dashboard hash-password`)"
            )
        users[name] = User(name=name, role=role, password_hash=stored)
    return users


def _looks_like_hash(stored: str) -> bool:
    if stored.startswith("pbkdf2_sha256$"):
        return stored.count("$") == 3
    return len(stored) == 64 and all(c in "0123456789abcdefABCDEF" for c in stored)


def load_users(environ: Mapping[str, str] | None = None) -> dict[str, User]:
    """The users of the process environment, or of `environ` when given (tests, the CLI)."""
    env = environment() if environ is None else Environment.model_validate(dict(environ))
    users: dict[str, User] = {}
    if env.dashboard_users_file is not None:
        path = env.dashboard_users_file
        try:
            lines = Path(path).read_text().splitlines()
        except OSError as err:
            raise AuthConfigError(f"{USERS_FILE_ENV}: cannot read {path}: {err.strerror}") from None
        users |= parse_users(lines, USERS_FILE_ENV)
    if env.dashboard_users is not None and env.dashboard_users.get_secret_value():
        users |= parse_users(env.dashboard_users.get_secret_value().split(","), USERS_ENV)
    return users


def authenticate(users: Mapping[str, User], name: str, password: str) -> User | None:
    user = users.get(name.strip())
    if user is None:
        # spend the same time as a real check so that names cannot be probed by timing
        hashlib.pbkdf2_hmac("sha256", password.encode(), b"0" * 16, PBKDF2_ITERATIONS)
        return None
    return user if verify_password(password, user.password_hash) else None
