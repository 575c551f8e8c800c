"""Sign-in cookies: signed, expiring, and void once their server-side session is closed."""

from __future__ import annotations

import stat

import pytest

from dashboard.access.sessions import (
    SECRET_FILE,
    SESSIONS_DIR,
    SessionConfigError,
    SessionStore,
    load_secret,
)
from gateway.domain.environment import Environment

SECRET = b"s" * 32


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def store(tmp_path, clock):
    return SessionStore(tmp_path / SESSIONS_DIR, SECRET, ttl_s=3600, clock=clock)


def test_a_cookie_resolves_to_its_user_until_the_session_is_closed(store, tmp_path):
    opened = store.open("alice", "cred")
    assert opened.max_age_s == 3600
    assert store.resolve(opened.cookie) == ("alice", opened.session_id)
    # the record holds no usable cookie: named by a digest, the id itself is not in it
    (record,) = (tmp_path / SESSIONS_DIR).iterdir()
    assert opened.session_id not in record.name and opened.session_id not in record.read_text()
    assert stat.S_IMODE(record.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / SESSIONS_DIR).stat().st_mode) == 0o700
    store.close(opened.session_id)
    # a copy of the cookie taken before the sign-out signs nobody in
    assert store.resolve(opened.cookie) is None
    assert not store.is_live(opened.session_id, "alice")


def test_a_cookie_expires(store, clock):
    opened = store.open("alice", "cred")
    clock.now += 3599
    assert store.resolve(opened.cookie) is not None
    clock.now += 2
    assert store.resolve(opened.cookie) is None
    assert not store.is_live(opened.session_id, "alice")


def test_tampered_or_foreign_cookies_are_refused(store, tmp_path, clock):
    opened = store.open("alice", "cred")
    version, name, sid, expires, signature = opened.cookie.split(".")
    bob = SessionStore(tmp_path / SESSIONS_DIR, SECRET, 3600, clock).open("bob", "cred")
    forged = [
        # another name on alice's session
        ".".join((version, bob.cookie.split(".")[1], sid, expires, signature)),
        # a later expiry
        ".".join((version, name, sid, str(int(expires) + 10**6), signature)),
        # alice's fields signed with another secret
        SessionStore(tmp_path / SESSIONS_DIR, b"t" * 32, 3600, clock).open("alice", "cred").cookie,
        opened.cookie[:-2] + ("AA" if not opened.cookie.endswith("AA") else "BB"),
        "v1.garbage",
        "",
    ]
    for cookie in forged:
        assert store.resolve(cookie) is None, cookie
    assert store.resolve(opened.cookie) == ("alice", opened.session_id)


def test_the_session_id_must_belong_to_the_name(store):
    opened = store.open("alice", "cred")
    assert store.is_live(opened.session_id, "alice")
    assert not store.is_live(opened.session_id, "mallory")
    assert not store.is_live("", "alice")


def test_expired_records_are_pruned_when_someone_signs_in(store, tmp_path, clock):
    store.open("alice", "cred")
    clock.now += 7200
    store.open("bob", "cred")
    assert len(list((tmp_path / SESSIONS_DIR).iterdir())) == 1


def test_the_secret_file_is_made_once_with_mode_600_and_kept(tmp_path):
    env = Environment.model_validate({"COSTGATE_STATE_DIR": str(tmp_path)})
    first = load_secret(env)
    path = tmp_path / SECRET_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and len(first) == 64
    assert load_secret(env) == first
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind


def test_a_secret_file_others_may_read_is_refused(tmp_path):
    env = Environment.model_validate({"COSTGATE_STATE_DIR": str(tmp_path)})
    load_secret(env)
    (tmp_path / SECRET_FILE).chmod(0o644)
    with pytest.raises(SessionConfigError, match="chmod 600"):
        load_secret(env)


def test_the_secret_from_the_environment_must_be_long(tmp_path):
    long = Environment.model_validate(
        {"COSTGATE_DASHBOARD_SECRET": "k" * 40, "COSTGATE_STATE_DIR": str(tmp_path)}
    )
    assert load_secret(long) == b"k" * 40
    assert not (tmp_path / SECRET_FILE).exists()
    short = Environment.model_validate({"COSTGATE_DASHBOARD_SECRET": "hunter2"})
    with pytest.raises(SessionConfigError, match="shorter than 32") as err:
        load_secret(short)
    assert "hunter2" not in str(err.value)


def test_from_environment_uses_the_state_dir_and_the_session_hours(tmp_path):
    env = Environment.model_validate(
        {"COSTGATE_STATE_DIR": str(tmp_path), "COSTGATE_DASHBOARD_SESSION_HOURS": "2"}
    )
    store = SessionStore.from_environment(env)
    opened = store.open("alice", "cred")
    assert opened.max_age_s == 7200 and store.folder == tmp_path / SESSIONS_DIR
    # a second store on the same state dir (another dashboard process) sees the session
    assert SessionStore.from_environment(env).resolve(opened.cookie) == (
        "alice",
        opened.session_id,
    )
