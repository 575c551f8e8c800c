from __future__ import annotations

import hashlib

import pytest

from dashboard.auth import (
    USERS_ENV,
    USERS_FILE_ENV,
    AuthConfigError,
    authenticate,
    hash_password,
    load_users,
    verify_password,
)


def test_pbkdf2_hash_verifies_only_the_right_password():
    stored = hash_password("s3cret", iterations=1000)
    assert stored.startswith("pbkdf2_sha256$1000$")
    assert verify_password("s3cret", stored)
    assert not verify_password("s3cret ", stored)
    assert hash_password("s3cret", iterations=1000) != stored  # salted


def test_bare_sha256_hex_is_accepted():
    assert verify_password("pw", hashlib.sha256(b"pw").hexdigest().upper())


def test_users_from_env_and_file(tmp_path):
    file = tmp_path / "users"
    file.write_text(f"# ops\ncarol:ops:{hash_password('c', 1000)}\n\n")
    env = {
        USERS_ENV: f"alice:ops:{hash_password('a', 1000)}, "
        f"bob:viewer:{hashlib.sha256(b'b').hexdigest()}",
        USERS_FILE_ENV: str(file),
    }
    users = load_users(env)
    assert {u.name: u.role for u in users.values()} == {
        "alice": "ops",
        "bob": "viewer",
        "carol": "ops",
    }
    assert authenticate(users, "bob", "b").role == "viewer"
    assert authenticate(users, "bob", "a") is None
    assert authenticate(users, "nobody", "a") is None
    assert users["alice"].can_edit_routing and not users["bob"].can_edit_routing


def test_no_configuration_means_no_users():
    assert load_users({}) == {}


@pytest.mark.parametrize(
    "entry, message",
    [
        ("alice:admin:" + "0" * 64, "role 'admin'"),
        ("alice:ops", "expected name:role:hash"),
        ("alice:ops:plaintext-password", "not a password hash"),
    ],
)
def test_bad_entries_are_refused_without_echoing_secrets(entry, message):
    with pytest.raises(AuthConfigError, match=message) as err:
        load_users({USERS_ENV: entry})
    assert "plaintext-password" not in str(err.value)


def test_unreadable_users_file_is_an_error(tmp_path):
    with pytest.raises(AuthConfigError, match="cannot read"):
        load_users({USERS_FILE_ENV: str(tmp_path / "missing")})


def test_user_repr_hides_the_hash():
    users = load_users({USERS_ENV: f"alice:ops:{hash_password('a', 1000)}"})
    assert "pbkdf2" not in repr(users["alice"])
