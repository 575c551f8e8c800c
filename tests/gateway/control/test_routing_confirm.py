"""The rollout check of a routing change asks each replica's `/costgate/routing`, which
wants an admin key: it sends the control plane's, and says at once when it has none.

Against the plain gateway (tests/gateway/conftest.py): the real HTTP app over a real
socket, in this process, so the one replica's PID is ours.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator

import pytest

from db.keys import hash_key
from gateway.control.declarative import RoutingUpdateError
from gateway.control.routing_update import _wait_replicas_report
from gateway.replica.auth import Caller
from gateway.replica.key_scope import KeyScope

ADMIN_KEY = "cg-confirm-admin"


@pytest.fixture
def gw(plain_gateway, monkeypatch, tmp_path) -> Iterator[object]:
    monkeypatch.setenv("COSTGATE_STATE_DIR", str(tmp_path))
    monkeypatch.delenv("COSTGATE_ADMIN_KEY", raising=False)
    admin = Caller(app="ops", team=None, key_id=uuid.uuid4(), scope=KeyScope(admin=True))
    plain_gateway.service.keys.replace({hash_key(ADMIN_KEY): admin})
    yield plain_gateway
    plain_gateway.service.keys.replace({})


def confirm(gw) -> set[int]:
    version = gw.service.routing.version
    return _wait_replicas_report(
        gw.base_url, lambda: {os.getpid()}, version, time.monotonic() + 20
    )


def test_the_admin_key_from_the_environment_confirms_the_replica(gw, monkeypatch):
    monkeypatch.setenv("COSTGATE_ADMIN_KEY", ADMIN_KEY)
    assert confirm(gw) == {os.getpid()}


def test_the_admin_key_kept_under_the_state_dir_is_the_default(gw, tmp_path):
    (tmp_path / "admin_key").write_text(ADMIN_KEY + "\n")
    assert confirm(gw) == {os.getpid()}


@pytest.mark.parametrize("key", [None, "app"])
def test_without_an_admin_key_it_fails_at_once_and_says_what_is_needed(gw, monkeypatch, key):
    if key == "app":
        monkeypatch.setenv("COSTGATE_ADMIN_KEY", gw.api_key)  # a valid key, not an admin one
    started = time.monotonic()
    with pytest.raises(RoutingUpdateError) as info:
        confirm(gw)
    assert time.monotonic() - started < 5  # not the whole 20 s deadline
    message = str(info.value)
    assert "COSTGATE_ADMIN_KEY" in message and "admin gateway key" in message
    assert gw.api_key not in message
