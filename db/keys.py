"""Gateway keys: apps (and their teams) authenticate with them; only hashes are stored.

A key is `cg-` + 43 characters of `secrets.token_urlsafe(32)` (256 random bits), shown
once at creation. It is stored as an unsalted SHA-256: with that much entropy a salt or
a slow KDF adds nothing (nobody can brute-force 2^256), and a plain digest lets the
gateway look a presented key up in a dict in O(1) on every request.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import secrets
import uuid

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


@dataclasses.dataclass(frozen=True, slots=True)
class KeyListing:
    key_id: uuid.UUID
    app: str
    team: str | None
    prefix: str
    created_at: dt.datetime
    revoked_at: dt.datetime | None


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
    engine_or_url: Engine | str | None, app: str, team: str | None = None
) -> tuple[str, KeyListing]:
    """Create a key for `app` (created if new; moved to `team` when one is given).

    Returns the key itself, which is not stored anywhere, and its listing.
    """
    if not app.strip():
        raise ValueError("an app name is required")
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
                    id=key_id, app_id=app_id, key_hash=hash_key(key), prefix=key[:SHOWN_PREFIX_LEN]
                )
            )
        return key, _listing(engine, key_id)


def _listing(engine: Engine, key_id: uuid.UUID) -> KeyListing:
    with engine.connect() as conn:
        return KeyListing(*conn.execute(_listing_query().where(ApiKey.id == key_id)).one())


# columns in KeyListing's order (the team is NULL for an app without one)
_Listing = Select[uuid.UUID, str, str, str, dt.datetime, dt.datetime | None]


def _listing_query() -> _Listing:
    query: _Listing = (
        select(ApiKey.id, App.name, Team.name, ApiKey.prefix, ApiKey.created_at, ApiKey.revoked_at)
        .join(App, ApiKey.app_id == App.id)
        .outerjoin(Team, App.team_id == Team.id)
    )
    return query


def list_keys(
    engine_or_url: Engine | str | None = None, *, include_revoked: bool = True
) -> list[KeyListing]:
    query = _listing_query().order_by(ApiKey.created_at, ApiKey.id)
    if not include_revoked:
        query = query.where(ApiKey.revoked_at.is_(None))
    with engine_scope(engine_or_url) as engine, engine.connect() as conn:
        rows = conn.execute(query).all()
    return [KeyListing(*row) for row in rows]


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
    """hash -> who the key belongs to, for every key not revoked (the gateway's auth table)."""
    query = (
        select(ApiKey.key_hash, ApiKey.id, App.name, Team.name)
        .join(App, ApiKey.app_id == App.id)
        .outerjoin(Team, App.team_id == Team.id)
        .where(ApiKey.revoked_at.is_(None))
    )
    with engine_scope(engine_or_url) as engine, engine.connect() as conn:
        rows = conn.execute(query).all()
    return {h: KeyInfo(key_id=i, app=a, team=t) for h, i, a, t in rows}
