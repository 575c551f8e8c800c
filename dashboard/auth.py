"""Dashboard users and roles, from configuration only (never from the repository).

Users come from `COSTGATE_DASHBOARD_USERS` ("alice:ops:<hash>,bob:finance:<hash>:search")
and/or a file named by `COSTGATE_DASHBOARD_USERS_FILE` (one entry per line, `#`
comments). An entry is `name:role:hash`, or `name:role:hash:team` for a user who sees
only that team's rows. A hash is `pbkdf2_sha256$<iterations>$<salt hex>$<digest hex>`
(what `costgate dashboard hash-password` prints) with at least
`MIN_PBKDF2_ITERATIONS`: nothing unsalted or fast is accepted, since a leaked bare
SHA-256 digest of a password is cracked offline in moments. A refused entry stops the
dashboard at start with an error that names the user, never the hash.

Roles, and what each may do (`ROLE_PERMISSIONS`): `finance` spend, savings and export,
budgets (read and change), customers (spend per end user, margins); `ops` latency and
errors, the request log, routing (read and change), budgets (read); `admin` all of it;
`viewer` reads spend, savings, latency, routing and budgets and changes nothing.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import hmac
import secrets
from collections.abc import Mapping
from pathlib import Path

from gateway.domain.environment import Environment, environment

USERS_ENV = "COSTGATE_DASHBOARD_USERS"
USERS_FILE_ENV = "COSTGATE_DASHBOARD_USERS_FILE"
PBKDF2_ITERATIONS = 200_000  # ~70 ms here: slow for a guesser, unnoticed at sign-in
MIN_PBKDF2_ITERATIONS = 100_000
_PBKDF2_PREFIX = "pbkdf2_sha256$"
_HEX = frozenset("0123456789abcdefABCDEF")


class Permission(enum.StrEnum):
    SPEND = "spend"  # Overview, Savings, Spend
    EXPORT = "export"  # the CSV export
    LATENCY = "latency"  # Latency & errors
    REQUESTS = "requests"  # the request log and its drill-down
    ROUTING_VIEW = "routing_view"  # live weights and their history
    ROUTING_EDIT = "routing_edit"  # apply a routing change
    BUDGETS_VIEW = "budgets_view"  # budgets, their burn-down and forecast, their history
    BUDGETS_EDIT = "budgets_edit"  # create or change a budget
    CUSTOMERS = "customers"  # spend per end user and session, margins (end user ids)


ROLE_PERMISSIONS: dict[str, frozenset[Permission]] = {
    "viewer": frozenset(
        {Permission.SPEND, Permission.LATENCY, Permission.ROUTING_VIEW, Permission.BUDGETS_VIEW}
    ),
    "finance": frozenset(
        {
            Permission.SPEND,
            Permission.EXPORT,
            Permission.BUDGETS_VIEW,
            Permission.BUDGETS_EDIT,
            Permission.CUSTOMERS,
        }
    ),
    "ops": frozenset(
        {
            Permission.LATENCY,
            Permission.REQUESTS,
            Permission.ROUTING_VIEW,
            Permission.ROUTING_EDIT,
            Permission.BUDGETS_VIEW,
        }
    ),
    "admin": frozenset(Permission),
}
ROLES = tuple(ROLE_PERMISSIONS)


def role_allows(role: str, permission: Permission) -> bool:
    return permission in ROLE_PERMISSIONS.get(role, frozenset())


class AuthConfigError(ValueError):
    """A users entry that cannot be used; the message names it, never a hash or password."""


@dataclasses.dataclass(frozen=True)
class User:
    name: str
    role: str
    password_hash: str = dataclasses.field(repr=False)
    team: str | None = None  # set: this user sees only this team's rows

    def can(self, permission: Permission) -> bool:
        return role_allows(self.role, permission)


def hash_password(password: str, iterations: int = PBKDF2_ITERATIONS) -> str:
    if iterations < MIN_PBKDF2_ITERATIONS:
        raise ValueError(f"at least {MIN_PBKDF2_ITERATIONS} iterations: fewer would be refused")
    salt = secrets.token_bytes(16)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    return f"{_PBKDF2_PREFIX}{iterations}${salt.hex()}${digest.hex()}"


def _hash_problem(stored: str) -> str | None:
    """Why `stored` is not an acceptable hash, in words that never quote it."""
    if len(stored) == 64 and set(stored) <= _HEX:
        return (
            "a bare SHA-256 digest is not accepted (unsalted and fast to guess); make a "
            "salted hash with `costgate dashboard hash-password`"
        )
    parts = stored.split("$")
    if not stored.startswith(_PBKDF2_PREFIX) or len(parts) != 4:
        return "not a password hash (use `costgate dashboard hash-password`)"
    _, iterations, salt, digest = parts
    if not iterations.isdigit() or int(iterations) < MIN_PBKDF2_ITERATIONS:
        return (
            f"a PBKDF2 hash needs at least {MIN_PBKDF2_ITERATIONS} iterations; make a new one "
            "with `costgate dashboard hash-password`"
        )
    # 8+ bytes of salt; the digest is SHA-256's 32 bytes
    if len(salt) < 16 or len(salt) % 2 or not set(salt) <= _HEX:
        return "the hash's salt is too short or not hex"
    if len(digest) != 64 or not set(digest) <= _HEX:
        return "the hash's digest is not 64 hex characters"
    return None


def verify_password(password: str, stored: str) -> bool:
    """True only for the right password against an acceptable PBKDF2 hash."""
    if _hash_problem(stored) is not None:
        return False
    _, iterations, salt, digest = stored.split("$")
    computed = hashlib.pbkdf2_hmac(
        "sha256", password.encode(), bytes.fromhex(salt), int(iterations)
    )
    return hmac.compare_digest(computed.hex(), digest.lower())


def parse_users(entries: list[str], source: str) -> dict[str, User]:
    users: dict[str, User] = {}
    for i, raw in enumerate(entries, start=1):
        entry = raw.strip()
        if not entry or entry.startswith("#"):
            continue
        parts = [p.strip() for p in entry.split(":")]
        if len(parts) not in (3, 4) or not all(parts):
            raise AuthConfigError(f"{source} entry {i}: expected name:role:hash[:team]")
        name, role, stored = parts[:3]
        if role not in ROLES:
            raise AuthConfigError(
                f"{source} entry {i} ({name}): role {role!r} is not one of {', '.join(ROLES)}"
            )
        problem = _hash_problem(stored)
        if problem is not None:
            raise AuthConfigError(f"{source} entry {i} ({name}): {problem}")
        if name in users:
            raise AuthConfigError(f"{source} entry {i} ({name}): the name is listed twice")
        team = parts[3] if len(parts) == 4 else None
        users[name] = User(name=name, role=role, password_hash=stored, team=team)
    return users


def load_users(environ: Mapping[str, str] | None = None) -> dict[str, User]:
    """The users of the process environment, or of `environ` when given (tests, the CLI).

    A name in both the file and the variable takes the variable's entry.
    """
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
