"""KeyRing: keys by hash, reloads on a miss, and what happens without keys."""

from __future__ import annotations

import asyncio
import threading
import uuid

import pytest

from db.keys import hash_key
from gateway.domain.openai_errors import OpenAIError
from gateway.replica.auth import ANONYMOUS, Caller, KeyRing

ALICE = Caller(app="alice-app", team="a", key_id=uuid.uuid4())


async def test_a_known_key_identifies_its_app_and_a_wrong_one_is_a_401():
    ring = KeyRing(require_keys=True)
    ring.replace({hash_key("cg-alice"): ALICE})
    assert await ring.identify("Bearer cg-alice") == ALICE
    for header in (None, "", "Bearer ", "Basic cg-alice", "Bearer cg-bob"):
        with pytest.raises(OpenAIError) as info:
            await ring.identify(header)
        assert info.value.status == 401 and "cg-bob" not in info.value.message


async def test_without_required_keys_unknown_callers_are_anonymous():
    ring = KeyRing(require_keys=False)
    ring.replace({hash_key("cg-alice"): ALICE})
    assert await ring.identify("Bearer sk-whatever") == ANONYMOUS
    assert await ring.identify("Bearer cg-alice") == ALICE


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


async def test_a_flood_of_wrong_keys_reloads_at_most_once_per_interval():
    loads = 0

    def load() -> dict[str, Caller]:
        nonlocal loads
        loads += 1
        return {}

    ring = KeyRing(require_keys=True)
    ring._load = load
    for i in range(100):
        with pytest.raises(OpenAIError):
            await ring.identify(f"Bearer cg-wrong-{i}")
    assert loads == 1


def test_static_keys_from_the_environment_belong_to_the_default_app(monkeypatch):
    monkeypatch.setenv("BOOTSTRAP_KEY", "cg-bootstrap")
    ring = KeyRing(require_keys=True, static_key_envs=("BOOTSTRAP_KEY",))
    assert asyncio.run(ring.identify("Bearer cg-bootstrap")).app == "default"
