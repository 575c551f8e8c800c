"""Gateway keys: apps (and their teams) authenticate with them; only hashes are stored.

A key is `cg-` + 43 characters of `secrets.token_urlsafe(32)` (256 random bits), shown
once at creation. It is stored as an unsalted SHA-256: with that much entropy a salt or
a slow KDF adds nothing (nobody can brute-force 2^256), and a plain digest lets the
gateway look a presented key up in a dict in O(1) on every request.

A key may carry a scope (the models and aliases it may name, its largest `n` and
output-token cap, an expiry) and may be an admin key; the gateway enforces them
(`gateway.replica.key_scope`), this module only stores them.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import secrets
import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Engine, Select, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.orm import Session

from db.engine import engine_scope
from db.models import ApiKey, App, Team

KEY_PREFIX = "cg-"
SHOWN_PREFIX_LEN = len(KEY_PREFIX) + 6  # enough to tell keys apart in a listing


class KeyLookupError(LookupError):
    """No key, or more than one, matches what was given."""


@dataclasses.dataclass(frozen=True, slots=True)
class KeyInfo:
    """What the gateway needs to attribute a request to its app and team."""

    key_id: uuid.UUID
    app: str
    team: str | None
    allowed_models: tuple[str, ...] | None = None  # None: any model or alias
    max_n: int | None = None
    max_output_tokens: int | None = None
    expires_at: dt.datetime | None = None
    is_admin: bool = False
    rpm_limit: int | None = None  # requests per minute across every replica
    tpm_limit: int | None = None  # tokens (prompt + output) per minute


@dataclasses.dataclass(frozen=True, slots=True)
class KeyListing:
    key_id: uuid.UUID
    app: str
    team: str | None
    prefix: str
    created_at: dt.datetime
    revoked_at: dt.datetime | None
    allowed_models: tuple[str, ...] | None = None
    max_n: int | None = None
    max_output_tokens: int | None = None
    expires_at: dt.datetime | None = None
    is_admin: bool = False
    rpm_limit: int | None = None
    tpm_limit: int | None = None


def generate_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _upsert_named(session: Session, model: type[Team] | type[App], name: str) -> uuid.UUID:
    stmt = (
        pg_insert(model)
        .values(id=uuid.uuid4(), name=name)
        # a no-op update so RETURNING yields the existing row's id too
        .on_conflict_do_update(index_elements=["name"], set_={"name": name})
        .returning(model.id)
    )
    return session.execute(stmt).scalar_one()


def create_key(
    engine_or_url: Engine | str | None,
    app: str,
    team: str | None = None,
    *,
    allowed_models: Sequence[str] | None = None,
    max_n: int | None = None,
    max_output_tokens: int | None = None,
    expires_at: dt.datetime | None = None,
    is_admin: bool = False,
    rpm_limit: int | None = None,
    tpm_limit: int | None = None,
) -> tuple[str, KeyListing]:
    """Create a key for `app` (created if new; moved to `team` when one is given).

    The scope arguments left at None leave the key unlimited in that respect. Returns the
    key itself, which is not stored anywhere, and its listing.
    """
    if not app.strip():
        raise ValueError("an app name is required")
    models = None if allowed_models is None else _model_names(allowed_models)
    caps = (("max_n", max_n), ("max_output_tokens", max_output_tokens))
    for name, cap in (*caps, ("rpm_limit", rpm_limit), ("tpm_limit", tpm_limit)):
        if cap is not None and cap < 1:
            raise ValueError(f"{name} must be at least 1 (got {cap})")
    if expires_at is not None and expires_at.tzinfo is None:
        raise ValueError("expires_at needs a time zone")
    key = generate_key()
    key_id = uuid.uuid4()
    with engine_scope(engine_or_url) as engine:
        with Session(engine) as session, session.begin():
            app_id = _upsert_named(session, App, app)
            if team is not None:
                team_id = _upsert_named(session, Team, team)
                session.execute(update(App).where(App.id == app_id).values(team_id=team_id))
            session.add(
                ApiKey(
                    id=key_id,
                    app_id=app_id,
                    key_hash=hash_key(key),
                    prefix=key[:SHOWN_PREFIX_LEN],
                    allowed_models=models,
                    max_n=max_n,
                    max_output_tokens=max_output_tokens,
                    expires_at=expires_at,
                    is_admin=is_admin,
                    rpm_limit=rpm_limit,
                    tpm_limit=tpm_limit,
                )
            )
        return key, _listing(engine, key_id)


def _model_names(names: Sequence[str]) -> list[str]:
    """Stripped, de-duplicated, in the order given; an empty scope would be a dead key."""
    if isinstance(names, str):  # a str is a Sequence too: "gpt-4o" is not 6 model names
        raise TypeError("allowed_models is a list of names, not one string")
    out = list(dict.fromkeys(n.strip() for n in names if n.strip()))
    if not out:
        raise ValueError("allowed_models needs at least one model or alias name")
    return out


def _listing(engine: Engine, key_id: uuid.UUID) -> KeyListing:
    with engine.connect() as conn:
        return _as_listing(conn.execute(_listing_query().where(ApiKey.id == key_id)).one())


# columns in KeyListing's order (the team is NULL for an app without one)
_Listing = Select[
    uuid.UUID,
    str,
    str,
    str,
    dt.datetime,
    dt.datetime | None,
    list[str] | None,
    int | None,
    int | None,
    dt.datetime | None,
    bool,
    int | None,
    int | None,
]


def _listing_query() -> _Listing:
    query: _Listing = (
        select(
            ApiKey.id,
            App.name,
            Team.name,
            ApiKey.prefix,
            ApiKey.created_at,
            ApiKey.revoked_at,
            ApiKey.allowed_models,
            ApiKey.max_n,
            ApiKey.max_output_tokens,
            ApiKey.expires_at,
            ApiKey.is_admin,
            ApiKey.rpm_limit,
            ApiKey.tpm_limit,
        )
        .join(App, ApiKey.app_id == App.id)
        .outerjoin(Team, App.team_id == Team.id)
    )
    return query


def _as_listing(row: Any) -> KeyListing:
    key_id, app, team, prefix, created, revoked, models, max_n, max_out, expires, admin = row[:11]
    scope = (_models(models), max_n, max_out, expires, bool(admin), row[11], row[12])
    return KeyListing(key_id, app, team, prefix, created, revoked, *scope)


def _models(stored: list[str] | None) -> tuple[str, ...] | None:
    return None if stored is None else tuple(stored)


def list_keys(
    engine_or_url: Engine | str | None = None, *, include_revoked: bool = True
) -> list[KeyListing]:
    query = _listing_query().order_by(ApiKey.created_at, ApiKey.id)
    if not include_revoked:
        query = query.where(ApiKey.revoked_at.is_(None))
    with engine_scope(engine_or_url) as engine, engine.connect() as conn:
        rows = conn.execute(query).all()
    return [_as_listing(row) for row in rows]


def revoke_key(engine_or_url: Engine | str | None, key_id: str) -> KeyListing:
    """Revoke by id, or by an unambiguous start of the id (at least 8 characters).

    Revoking twice keeps the first revocation time. Raises KeyLookupError if nothing or
    several keys match.
    """
    wanted = key_id.strip().lower()
    if len(wanted) < 8:
        raise KeyLookupError("give at least the first 8 characters of the key id")
    with engine_scope(engine_or_url) as engine:
        matches = [k for k in list_keys(engine) if str(k.key_id).startswith(wanted)]
        if len(matches) != 1:
            raise KeyLookupError(
                f"no key with id {key_id!r}" if not matches else f"{key_id!r} matches several keys"
            )
        with engine.begin() as conn:
            conn.execute(
                update(ApiKey)
                .where(ApiKey.id == matches[0].key_id, ApiKey.revoked_at.is_(None))
                .values(revoked_at=dt.datetime.now(dt.UTC))
            )
        return _listing(engine, matches[0].key_id)


def load_active_keys(engine_or_url: Engine | str | None = None) -> dict[str, KeyInfo]:
    """hash -> who the key belongs to and its scope, for every key not revoked (the
    gateway's auth table). Expired keys are in it: the gateway tells their holders so."""
    query = (
        select(
            ApiKey.key_hash,
            ApiKey.id,
            App.name,
            Team.name,
            ApiKey.allowed_models,
            ApiKey.max_n,
            ApiKey.max_output_tokens,
            ApiKey.expires_at,
            ApiKey.is_admin,
            ApiKey.rpm_limit,
            ApiKey.tpm_limit,
        )
        .join(App, ApiKey.app_id == App.id)
        .outerjoin(Team, App.team_id == Team.id)
        .where(ApiKey.revoked_at.is_(None))
    )
    with engine_scope(engine_or_url) as engine, engine.connect() as conn:
        rows = conn.execute(query).all()
    return {
        h: KeyInfo(i, a, t, _models(models), max_n, max_out, expires, bool(admin), rpm, tpm)
        for h, i, a, t, models, max_n, max_out, expires, admin, rpm, tpm in rows
    }
