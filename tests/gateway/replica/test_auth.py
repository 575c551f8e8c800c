"""KeyRing: keys by hash, reloads on a miss, expiry, admin keys, and what happens
without required keys."""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
import uuid

import pytest

from db.keys import KeyInfo, hash_key
from gateway.domain.openai_errors import OpenAIError
from gateway.replica.auth import ANONYMOUS, MISS_LOOKUPS_PER_S, Caller, KeyRing
from gateway.replica.key_scope import KeyScope

ALICE = Caller(app="alice-app", team="a", key_id=uuid.uuid4())
ADMIN = Caller(app="ops", team=None, key_id=uuid.uuid4(), scope=KeyScope(admin=True))


async def test_a_known_key_identifies_its_app_and_a_wrong_one_is_a_401():
    ring = KeyRing(require_keys=True)
    ring.replace({hash_key("cg-alice"): ALICE})
    assert await ring.identify("Bearer cg-alice") == ALICE
    for header in (None, "", "Bearer ", "Basic cg-alice", "Bearer cg-bob"):
        with pytest.raises(OpenAIError) as info:
            await ring.identify(header)
        assert info.value.status == 401 and "cg-bob" not in info.value.message


async def test_without_required_keys_only_a_request_without_a_key_is_anonymous():
    ring = KeyRing(require_keys=False)
    ring.replace({hash_key("cg-alice"): ALICE})
    for header in (None, "", "  ", "Bearer", "Bearer  "):
        assert await ring.identify(header) == ANONYMOUS, header
    assert await ring.identify("Bearer cg-alice") == ALICE
    # a key that is presented must be valid: a typo must not silently bill `anonymous`
    for header in ("Bearer sk-whatever", "Basic cg-alice", "cg-alice"):
        with pytest.raises(OpenAIError) as info:
            await ring.identify(header)
        assert info.value.status == 401 and info.value.code == "invalid_api_key"


async def test_an_expired_key_is_a_401_that_says_so_and_one_not_yet_expired_works():
    now = dt.datetime.now(dt.UTC)
    old = Caller(app="old", team=None, key_id=uuid.uuid4(),
                 scope=KeyScope(expires_at=now - dt.timedelta(seconds=1)))
    soon = Caller(app="soon", team=None, key_id=uuid.uuid4(),
                  scope=KeyScope(expires_at=now + dt.timedelta(hours=1)))
    for require in (True, False):
        ring = KeyRing(require_keys=require)
        ring.replace({hash_key("cg-old"): old, hash_key("cg-soon"): soon})
        with pytest.raises(OpenAIError) as info:
            await ring.identify("Bearer cg-old")
        assert info.value.status == 401 and "expired" in info.value.message
        assert await ring.identify("Bearer cg-soon") == soon


async def test_admin_endpoints_want_an_admin_key_even_with_keys_off():
    for require in (True, False):
        ring = KeyRing(require_keys=require)
        ring.replace({hash_key("cg-alice"): ALICE, hash_key("cg-admin"): ADMIN})
        assert await ring.identify_admin("Bearer cg-admin") == ADMIN
        for header, status in ((None, 401), ("Bearer cg-nobody", 401), ("Bearer cg-alice", 403)):
            with pytest.raises(OpenAIError) as info:
                await ring.identify_admin(header)
            assert info.value.status == status, (require, header)


def test_a_stored_key_becomes_a_caller_with_its_scope():
    expires = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
    info = KeyInfo(uuid.uuid4(), "app", "team", ("fast", "gpt-4.1"), 2, 500, expires, True)
    caller = Caller.of_key(info)
    assert (caller.app, caller.team, caller.key_id) == ("app", "team", info.key_id)
    assert caller.scope == KeyScope(frozenset({"fast", "gpt-4.1"}), 2, 500, expires, True)
    unscoped = Caller.of_key(KeyInfo(uuid.uuid4(), "app", None))
    assert unscoped.scope == KeyScope() and not unscoped.scope.admin


async def test_concurrent_misses_share_one_reload_and_find_a_new_key():
    store: dict[str, Caller] = {}
    loads = 0
    gate = threading.Event()

    def load() -> dict[str, Caller]:
        nonlocal loads
        loads += 1
        gate.wait(5)
        return dict(store)

    ring = KeyRing(require_keys=True)
    ring.start_refresh(load, every_s=3600)
    gate.set()
    await asyncio.sleep(0.1)  # the periodic load ran once with no keys
    ring.stop()
    gate.clear()
    store[hash_key("cg-new")] = ALICE
    results = asyncio.gather(*(ring.identify("Bearer cg-new") for _ in range(50)))
    await asyncio.sleep(0.1)
    gate.set()
    assert await results == [ALICE] * 50
    assert loads == 2


async def test_a_flood_of_wrong_keys_costs_at_most_the_lookup_budget():
    asked: list[str] = []

    def load_one(digest: str) -> Caller | None:
        asked.append(digest)
        return None

    ring = KeyRing(require_keys=True)
    ring.start_refresh(lambda: {}, every_s=3600, load_one=load_one)
    for i in range(100):
        with pytest.raises(OpenAIError):
            await ring.identify(f"Bearer cg-wrong-{i}")
    # a bucket of MISS_LOOKUPS_PER_S, refilled at that rate over a fraction of a second
    assert MISS_LOOKUPS_PER_S <= len(asked) < MISS_LOOKUPS_PER_S + 5
    # a wrong key found absent is not asked again before the next refresh
    with pytest.raises(OpenAIError):
        await ring.identify("Bearer cg-wrong-0")
    assert asked.count(hash_key("cg-wrong-0")) == 1
    ring.stop()


async def test_a_new_key_works_at_once_right_after_other_new_and_wrong_keys():
    """A key created a moment ago works on its first request, even when the replica has
    just looked up other unseen keys (the whole-set reload, at most once per 2 s, refused
    it for up to 2 s: the demo-traffic test's 160 requests all got 401s)."""
    store: dict[str, Caller] = {}
    ring = KeyRing(require_keys=True)
    ring.start_refresh(lambda: dict(store), every_s=3600,
                       load_one=lambda digest: store.get(digest))  # fmt: skip
    await ring.wait_loaded(5)
    with pytest.raises(OpenAIError):
        await ring.identify("Bearer cg-wrong")
    store[hash_key("cg-first")] = ALICE
    assert await ring.identify("Bearer cg-first") == ALICE
    second = Caller(app="bob-app", team=None, key_id=uuid.uuid4())
    store[hash_key("cg-second")] = second
    assert await ring.identify("Bearer cg-second") == second
    assert await ring.identify("Bearer cg-first") == ALICE  # now in the set, no query
    ring.stop()


async def test_a_lookup_that_fails_refuses_the_key_and_the_next_request_asks_again():
    calls = 0

    def load_one(digest: str) -> Caller | None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise OSError("database away")
        return ALICE

    ring = KeyRing(require_keys=True)
    ring.start_refresh(lambda: {}, every_s=3600, load_one=load_one)
    await ring.wait_loaded(5)
    with pytest.raises(OpenAIError):
        await ring.identify("Bearer cg-new")
    assert await ring.identify("Bearer cg-new") == ALICE
    ring.stop()


def test_static_keys_from_the_environment_belong_to_the_default_app(monkeypatch):
    monkeypatch.setenv("BOOTSTRAP_KEY", "cg-bootstrap")
    ring = KeyRing(require_keys=True, static_key_envs=("BOOTSTRAP_KEY",))
    assert asyncio.run(ring.identify("Bearer cg-bootstrap")).app == "default"


async def test_a_replica_can_wait_for_its_first_key_set_and_gives_up_in_time():
    ring = KeyRing(require_keys=True)
    assert not await ring.wait_loaded(0.05)  # a database outage at start: no hang

    async def arrive() -> None:
        await asyncio.sleep(0.05)
        ring.replace({})

    task = asyncio.create_task(arrive())
    assert await ring.wait_loaded(5)
    await task


async def test_before_its_first_key_set_a_replica_says_it_cannot_check_rather_than_invalid():
    def database_away() -> dict[str, Caller]:
        raise OSError("connection refused")

    ring = KeyRing(require_keys=True)
    ring.start_refresh(database_away, every_s=60)
    try:
        with pytest.raises(OpenAIError) as info:
            await ring.identify("Bearer cg-alice")
        assert info.value.status == 503 and info.value.code == "keys_unavailable"
        assert info.value.headers["retry-after"]
        with pytest.raises(OpenAIError) as info:
            await ring.identify(None)  # no key at all: that is known to be wrong
        assert info.value.status == 401
        # once a set arrived, a key not in it is invalid, outage or not
        ring.replace({hash_key("cg-bob"): ALICE})
        with pytest.raises(OpenAIError) as info:
            await ring.identify("Bearer cg-alice")
        assert info.value.status == 401
    finally:
        ring.stop()
