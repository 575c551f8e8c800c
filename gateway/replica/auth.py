"""Who is calling: gateway keys to (app, team), without a database call per request.

Keys live hashed in PostgreSQL (`db.keys`). Each replica keeps the active set in memory
and refreshes it in the background every `REFRESH_S`, so authentication costs one hash
and one dict lookup, a revocation reaches every replica within 5 s, and a PostgreSQL
outage keeps the last known set working instead of locking every app out.

A key that is presented must be valid whatever the config says: only a request with no
key at all is `anonymous`, and only when `require_keys` is off. Each key carries its
scope (`gateway.replica.key_scope`); an expired one is refused here like an unknown one.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import logging
import time
import uuid
from collections.abc import Callable, Mapping

from db.keys import KeyInfo, hash_key
from gateway.attribution.inputs import NO_KEY_TAGS, KeyTags
from gateway.domain.environment import secret_from_env
from gateway.domain.openai_errors import OpenAIError
from gateway.replica.key_scope import UNSCOPED, KeyScope

log = logging.getLogger("costgate.auth")

ANONYMOUS_APP = "anonymous"
MISS_RELOAD_S = 2.0
MISS_RELOAD_WAIT_S = 5.0
STATIC_APP = "default"
# one interval plus one query stays under the 5 s a revocation may take to reach a replica
REFRESH_S = 4.0


@dataclasses.dataclass(frozen=True, slots=True)
class Caller:
    app: str
    team: str | None
    key_id: uuid.UUID | None
    scope: KeyScope = UNSCOPED
    rpm_limit: int | None = None  # the key's requests per minute, across replicas
    tpm_limit: int | None = None
    tags: KeyTags = NO_KEY_TAGS  # the key's default tags and allowed tag keys
    user_rpm_limit: int | None = None  # each end user's, across replicas
    user_tpm_limit: int | None = None

    @classmethod
    def of_key(cls, info: KeyInfo) -> Caller:
        scope = KeyScope(
            models=None if info.allowed_models is None else frozenset(info.allowed_models),
            max_n=info.max_n,
            max_output_tokens=info.max_output_tokens,
            expires_at=info.expires_at,
            admin=info.is_admin,
        )
        return cls(
            app=info.app,
            team=info.team,
            key_id=info.key_id,
            scope=scope,
            rpm_limit=info.rpm_limit,
            tpm_limit=info.tpm_limit,
            tags=KeyTags(
                info.default_tags or None,
                None if info.allowed_tag_keys is None else frozenset(info.allowed_tag_keys),
            ),
            user_rpm_limit=info.user_rpm_limit,
            user_tpm_limit=info.user_tpm_limit,
        )


ANONYMOUS = Caller(app=ANONYMOUS_APP, team=None, key_id=None)


def bearer_token(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def _presented(authorization: str | None) -> bool:
    """Whether the client sent a credential at all (an empty `Bearer` is none)."""
    value = (authorization or "").strip()
    return bool(value) and value.lower() != "bearer"


def _unauthenticated(message: str = "") -> OpenAIError:
    # the same words whether the key is absent, malformed, unknown or revoked: nothing
    # tells a guesser which keys exist
    return OpenAIError(
        401,
        message or "Missing or invalid gateway key: send Authorization: Bearer <key>.",
        code="invalid_api_key",
    )


class KeyRing:
    """The active keys of this replica, swapped whole on each refresh."""

    def __init__(self, *, require_keys: bool, static_key_envs: tuple[str, ...] = ()) -> None:
        self.require_keys = require_keys
        self._static: dict[str, Caller] = {}
        for env in static_key_envs:
            value = secret_from_env(env)
            if value:
                self._static[hash_key(value)] = Caller(app=STATIC_APP, team=None, key_id=None)
        self._keys: Mapping[str, Caller] = {}
        self._task: asyncio.Task[None] | None = None
        self._load: Callable[[], Mapping[str, Caller]] | None = None
        self._miss_reload_at = float("-inf")
        self._refreshing: asyncio.Task[None] | None = None
        self.loaded = False
        self._first_load = asyncio.Event()

    def replace(self, keys: Mapping[str, Caller]) -> None:
        self._keys = dict(keys)
        self.loaded = True
        self._first_load.set()

    async def wait_loaded(self, timeout_s: float) -> bool:
        """Until the first key set arrived (or `timeout_s` passed: a database outage at
        start must not keep the replica from starting; its keys follow when it is back)."""
        try:
            await asyncio.wait_for(self._first_load.wait(), timeout=timeout_s)
        except TimeoutError:
            return False
        return True

    def _lookup(self, token: str | None) -> Caller | None:
        if token is None:
            return None
        digest = hash_key(token)
        return self._keys.get(digest) or self._static.get(digest)

    async def identify(self, authorization: str | None) -> Caller:
        token = bearer_token(authorization)
        caller = self._lookup(token)
        # A key created a moment ago is not in the set yet: reload now rather than refuse
        # it until the next periodic refresh, at most once per MISS_RELOAD_S so that a
        # flood of wrong keys cannot turn into a flood of queries.
        if caller is None and token is not None and self._load is not None:
            in_flight = self._refreshing is not None and not self._refreshing.done()
            if in_flight or time.monotonic() - self._miss_reload_at > MISS_RELOAD_S:
                await self._reload_once()
                caller = self._lookup(token)
        if caller is not None:
            if caller.scope.expired(dt.datetime.now(dt.UTC)):
                # only the key's holder can see this, and it tells them what to do
                raise _unauthenticated("This gateway key has expired; ask for a new one.")
            return caller
        if token is not None and self._load is not None and not self.loaded:
            # no key set has arrived yet (the database was away since this replica
            # started): whether the key is valid is unknown, and "invalid" would be a lie
            raise OpenAIError(
                503,
                "The gateway cannot check keys yet; retry shortly.",
                code="keys_unavailable",
                headers={"retry-after": "2"},
            )
        if self.require_keys or _presented(authorization):
            raise _unauthenticated()
        return ANONYMOUS

    async def identify_admin(self, authorization: str | None) -> Caller:
        """The caller of an administrative endpoint: a valid admin key, whatever the config."""
        if not _presented(authorization):
            raise _unauthenticated()
        caller = await self.identify(authorization)
        if not caller.scope.admin:
            raise OpenAIError(
                403, "This endpoint needs an admin gateway key.", code="admin_key_required"
            )
        return caller

    async def _reload_once(self) -> None:
        load = self._load
        if load is None:
            return
        if self._refreshing is None or self._refreshing.done():
            self._miss_reload_at = time.monotonic()

            async def reload() -> None:
                self.replace(await asyncio.to_thread(load))

            self._refreshing = asyncio.get_running_loop().create_task(reload())
        # a database outage must not hold requests: give up quickly, keep the old set
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.shield(self._refreshing), timeout=MISS_RELOAD_WAIT_S)

    def start_refresh(self, load: Callable[[], Mapping[str, Caller]], every_s: float) -> None:
        self._load = load

        async def loop() -> None:
            while True:
                try:
                    self.replace(await asyncio.to_thread(load))
                except Exception as err:  # noqa: BLE001 - keep the last set; retry later
                    log.warning("gateway keys not refreshed: %s", type(err).__name__)
                await asyncio.sleep(every_s)

        self._task = asyncio.get_running_loop().create_task(loop())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
