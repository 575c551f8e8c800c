"""Gateway keys: apps (and their teams) authenticate with them; only hashes are stored.

A key is `cg-` + 43 characters of `secrets.token_urlsafe(32)` (256 random bits), shown
once at creation. It is stored as an unsalted SHA-256: with that much entropy a salt or
a slow KDF adds nothing (nobody can brute-force 2^256), and a plain digest lets the
gateway look a presented key up in a dict in O(1) on every request.

A key may carry a scope (the models and aliases it may name, its largest `n` and
output-token cap, an expiry) and may be an admin key; the gateway enforces them
(`gateway.replica.key_scope`), this module only stores them. Likewise its attribution
part: default tags every request carries, the only tag keys a request may set itself,
and rate limits per end user (docs/ATTRIBUTION.md).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import secrets
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Engine, Select, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.orm import Session

from db.engine import engine_scope
from db.models import ApiKey, App, Team
from gateway.attribution.inputs import (
    MAX_TAG_KEY_CHARS,
    MAX_TAGS,
    AttributionError,
    check_tag,
    check_text,
)

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
    default_tags: dict[str, str] | None = None  # tags every request of the key carries
    allowed_tag_keys: tuple[str, ...] | None = None  # None: a request may set any tag key
    user_rpm_limit: int | None = None  # per end user of the key, across every replica
    user_tpm_limit: int | None = None


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
    default_tags: dict[str, str] | None = None
    allowed_tag_keys: tuple[str, ...] | None = None
    user_rpm_limit: int | None = None
    user_tpm_limit: int | None = None


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


# the apps the gateway bills without a key of their own: a key of either would share
# their budgets, limits and ledger rows (gateway.replica.auth STATIC_APP, ANONYMOUS_APP)
RESERVED_APPS = frozenset({"default", "anonymous"})


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
    default_tags: Mapping[str, str] | None = None,
    allowed_tag_keys: Sequence[str] | None = None,
    user_rpm_limit: int | None = None,
    user_tpm_limit: int | None = None,
) -> tuple[str, KeyListing]:
    """Create a key for `app` (created if new; moved to `team` when one is given).

    The scope arguments left at None leave the key unlimited in that respect;
    `allowed_tag_keys=[]` lets a request set no tag of its own (the default tags still
    apply). Returns the key itself, which is not stored anywhere, and its listing.
    """
    if not app.strip():
        raise ValueError("an app name is required")
    if app.strip() in RESERVED_APPS:
        raise ValueError(f"{app.strip()!r} is reserved (the static keys' and keyless requests' "
                         "app): choose another app name")  # fmt: skip
    models = None if allowed_models is None else _model_names(allowed_models)
    tags = None if default_tags is None else _default_tags(default_tags)
    tag_keys = None if allowed_tag_keys is None else _tag_keys(allowed_tag_keys)
    caps = (("max_n", max_n), ("max_output_tokens", max_output_tokens))
    limits = (("rpm_limit", rpm_limit), ("tpm_limit", tpm_limit))
    per_user = (("user_rpm_limit", user_rpm_limit), ("user_tpm_limit", user_tpm_limit))
    for name, cap in (*caps, *limits, *per_user):
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
                    default_tags=tags,
                    allowed_tag_keys=tag_keys,
                    user_rpm_limit=user_rpm_limit,
                    user_tpm_limit=user_tpm_limit,
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


def _default_tags(tags: Mapping[str, str]) -> dict[str, str] | None:
    """The request path's own bounds (`gateway.attribution.inputs`): a default tag that
    no request could carry would make every request of the key fail. Empty: none."""
    if not isinstance(tags, Mapping):
        raise TypeError("default_tags is a mapping of tag keys to values")
    if len(tags) > MAX_TAGS:
        raise ValueError(f"at most {MAX_TAGS} default tags (got {len(tags)})")
    try:
        checked = dict(check_tag(k, v, "default tag") for k, v in tags.items())
    except AttributionError as err:
        raise ValueError(err.message) from None
    return checked or None


def _tag_keys(keys: Sequence[str]) -> list[str]:
    """De-duplicated, in the order given; an empty list is a key whose requests set no tag."""
    if isinstance(keys, str):  # one key name is not a list of its characters
        raise TypeError("allowed_tag_keys is a list of tag keys, not one string")
    try:
        out = list(dict.fromkeys(check_text(k, "allowed tag key", MAX_TAG_KEY_CHARS) for k in keys))
    except AttributionError as err:
        raise ValueError(err.message) from None
    if len(out) > MAX_TAGS:
        raise ValueError(f"at most {MAX_TAGS} allowed tag keys (got {len(out)})")
    return out


def _listing(engine: Engine, key_id: uuid.UUID) -> KeyListing:
    with engine.connect() as conn:
        return _as_listing(conn.execute(_listing_query().where(ApiKey.id == key_id)).one())


# columns in KeyListing's order (the team is NULL for an app without one)
_LISTING_COLUMNS = (
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
    ApiKey.default_tags,
    ApiKey.allowed_tag_keys,
    ApiKey.user_rpm_limit,
    ApiKey.user_tpm_limit,
)


def _listing_query() -> Select[*tuple[Any, ...]]:
    return (
        select(*_LISTING_COLUMNS)
        .join(App, ApiKey.app_id == App.id)
        .outerjoin(Team, App.team_id == Team.id)
    )


def _as_listing(row: Any) -> KeyListing:
    (key_id, app, team, prefix, created, revoked, models, max_n, max_out, expires, admin,
     rpm, tpm, tags, tag_keys, user_rpm, user_tpm) = row  # fmt: skip
    return KeyListing(
        key_id, app, team, prefix, created, revoked, _models(models), max_n, max_out, expires,
        bool(admin), rpm, tpm, tags or None, _models(tag_keys), user_rpm, user_tpm,
    )  # fmt: skip


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


# every key not revoked, with its hash first
_ACTIVE_KEYS = (
    select(ApiKey.key_hash, *_LISTING_COLUMNS)
    .join(App, ApiKey.app_id == App.id)
    .outerjoin(Team, App.team_id == Team.id)
    .where(ApiKey.revoked_at.is_(None))
)


def load_active_keys(engine_or_url: Engine | str | None = None) -> dict[str, KeyInfo]:
    """hash -> who the key belongs to and its scope, for every key not revoked (the
    gateway's auth table). Expired keys are in it: the gateway tells their holders so."""
    with engine_scope(engine_or_url) as engine, engine.connect() as conn:
        rows = conn.execute(_ACTIVE_KEYS).all()
    return {row[0]: _as_info(_as_listing(row[1:])) for row in rows}


def load_active_key(engine_or_url: Engine | str | None, key_hash: str) -> KeyInfo | None:
    """The one active key with this hash, if any: a replica's check of a key it has not
    seen yet (one indexed row, where a reload of the whole set reads every key)."""
    query = _ACTIVE_KEYS.where(ApiKey.key_hash == key_hash)
    with engine_scope(engine_or_url) as engine, engine.connect() as conn:
        row = conn.execute(query).first()
    return None if row is None else _as_info(_as_listing(row[1:]))


def _as_info(k: KeyListing) -> KeyInfo:
    return KeyInfo(
        k.key_id,
        k.app,
        k.team,
        allowed_models=k.allowed_models,
        max_n=k.max_n,
        max_output_tokens=k.max_output_tokens,
        expires_at=k.expires_at,
        is_admin=k.is_admin,
        rpm_limit=k.rpm_limit,
        tpm_limit=k.tpm_limit,
        default_tags=k.default_tags,
        allowed_tag_keys=k.allowed_tag_keys,
        user_rpm_limit=k.user_rpm_limit,
        user_tpm_limit=k.user_tpm_limit,
    )
