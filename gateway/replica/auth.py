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
import dataclasses
import datetime as dt
import logging
import time
import uuid
from collections.abc import Callable, Mapping

from db.keys import KeyInfo, hash_key
from gateway.attribution.inputs import NO_KEY_TAGS, KeyTags
from gateway.concurrency.waits import within
from gateway.domain.environment import secret_from_env
from gateway.domain.openai_errors import OpenAIError
from gateway.replica.key_scope import UNSCOPED, KeyScope

log = logging.getLogger("costgate.auth")

ANONYMOUS_APP = "anonymous"
MISS_LOOKUP_WAIT_S = 5.0
# A key this replica has not seen is looked up on its own (one indexed row), so that a key
# created a moment ago works at once, whatever other new or wrong keys came just before
# (a whole-set reload at most every 2 s refused it for up to 2 s: seen in the suite). A
# flood of wrong keys costs at most MISS_LOOKUPS_PER_S such queries a second, and a hash
# found absent is not asked again before the next refresh.
MISS_LOOKUPS_PER_S = 20.0
MAX_ABSENT = 10_000  # memory bound on the hashes remembered as absent
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
        self._load_one: Callable[[str], Caller | None] | None = None
        self._checking: dict[str, asyncio.Task[Caller | None]] = {}
        self._absent: dict[str, float] = {}  # hash -> until when it is known not to exist
        self._allowance = MISS_LOOKUPS_PER_S  # a token bucket of lookups
        self._allowance_at = time.monotonic()
        self.loaded = False
        self._first_load = asyncio.Event()

    def replace(self, keys: Mapping[str, Caller]) -> None:
        self._keys = dict(keys)
        self._absent = {}  # a fresher set: what was absent may exist now
        self.loaded = True
        self._first_load.set()

    async def wait_loaded(self, timeout_s: float) -> bool:
        """Until the first key set arrived (or `timeout_s` passed: a database outage at
        start must not keep the replica from starting; its keys follow when it is back)."""
        try:
            await within(self._first_load.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    async def identify(self, authorization: str | None) -> Caller:
        token = bearer_token(authorization)
        caller = None
        if token is not None:
            digest = hash_key(token)
            caller = self._keys.get(digest) or self._static.get(digest)
            # a key created a moment ago is not in the set yet: ask for it rather than
            # refuse it until the next periodic refresh
            if caller is None and self._load_one is not None:
                caller = await self._check_unseen(digest)
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

    async def _check_unseen(self, digest: str) -> Caller | None:
        """The key with this hash from the database, or None (absent, or not known in
        MISS_LOOKUPS_PER_S's budget or MISS_LOOKUP_WAIT_S). Concurrent misses of one hash
        share one query."""
        now = time.monotonic()
        if self._absent.get(digest, 0.0) > now:
            return None
        task = self._checking.get(digest)
        if task is None:
            if not self._take_allowance(now):
                return None  # a flood of unseen keys: refused without a query
            task = asyncio.get_running_loop().create_task(self._fetch(digest))
            self._checking[digest] = task
            task.add_done_callback(lambda _: self._checking.pop(digest, None))
        # a database outage must not hold requests: give up quickly, keep the set
        try:
            return await within(asyncio.shield(task), MISS_LOOKUP_WAIT_S)
        except Exception:  # noqa: BLE001 - away or slow: the key is refused like a wrong one
            return None

    def _take_allowance(self, now: float) -> bool:
        elapsed, self._allowance_at = now - self._allowance_at, now
        self._allowance = min(MISS_LOOKUPS_PER_S, self._allowance + elapsed * MISS_LOOKUPS_PER_S)
        if self._allowance < 1.0:
            return False
        self._allowance -= 1.0
        return True

    async def _fetch(self, digest: str) -> Caller | None:
        load_one = self._load_one
        assert load_one is not None
        caller = await asyncio.to_thread(load_one, digest)
        if caller is None:
            if len(self._absent) >= MAX_ABSENT:
                self._absent.clear()
            self._absent[digest] = time.monotonic() + REFRESH_S
        else:
            # a new dict: a refresh may be iterating or replacing the old one
            self._keys = {**self._keys, digest: caller}
        return caller

    def start_refresh(
        self,
        load: Callable[[], Mapping[str, Caller]],
        every_s: float,
        load_one: Callable[[str], Caller | None] | None = None,
    ) -> None:
        """Load the whole set every `every_s`; a key not in it is asked with `load_one`
        (by default a whole load, for callers without a one-key query)."""
        self._load = load
        self._load_one = load_one or (lambda digest: load().get(digest))

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
