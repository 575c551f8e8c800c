"""The server's check reads the role from the configuration, never from the session."""

from __future__ import annotations

import pytest

from dashboard.access.guard import PermissionDenied, authorize, refresh
from dashboard.access.sessions import SessionStore, SessionUser
from dashboard.auth import MIN_PBKDF2_ITERATIONS, USERS_ENV, Permission, hash_password, load_users

HASH = hash_password("pw", MIN_PBKDF2_ITERATIONS)


def users_of(entries: str):
    return load_users({USERS_ENV: entries})


@pytest.fixture
def store(tmp_path):
    return SessionStore(tmp_path / "sessions", b"x" * 32, ttl_s=600)


def test_refresh_follows_the_configuration(store):
    sid = store.open("ann", HASH).session_id
    remembered = SessionUser("ann", "admin", None, sid)
    # the role changed since the sign-in: the configured one counts
    assert refresh(remembered, users_of(f"ann:finance:{HASH}:search"), store) == SessionUser(
        "ann", "finance", "search", sid
    )
    assert refresh(remembered, users_of(f"bob:admin:{HASH}"), store) is None  # removed
    store.close(sid)
    assert refresh(remembered, users_of(f"ann:admin:{HASH}"), store) is None  # signed out


def test_authorize_checks_the_permission_of_the_configured_role(store):
    users = users_of(f"fin:finance:{HASH},ops:ops:{HASH}")
    fin = SessionUser("fin", "admin", None, store.open("fin", HASH).session_id)  # claims admin
    assert authorize(fin, Permission.EXPORT, users=users, store=store).role == "finance"
    with pytest.raises(PermissionDenied, match=r"fin \(finance\) may not see latency"):
        authorize(fin, Permission.LATENCY, users=users, store=store)
    ops = SessionUser("ops", "ops", None, store.open("ops", HASH).session_id)
    with pytest.raises(PermissionDenied, match="may not see spend"):
        authorize(ops, Permission.SPEND, users=users, store=store)


def test_a_changed_password_ends_the_sessions_opened_with_the_old_one(store):
    sid = store.open("ann", HASH).session_id
    remembered = SessionUser("ann", "admin", None, sid)
    assert refresh(remembered, users_of(f"ann:admin:{HASH}"), store) is not None
    changed = hash_password("a new password", MIN_PBKDF2_ITERATIONS)
    assert refresh(remembered, users_of(f"ann:admin:{changed}"), store) is None
    # a session opened with the new password is live
    new_sid = store.open("ann", changed).session_id
    assert refresh(SessionUser("ann", "admin", None, new_sid), users_of(f"ann:admin:{changed}"),
                   store) is not None  # fmt: skip
