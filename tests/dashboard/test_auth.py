from __future__ import annotations

import hashlib

import pytest

from dashboard.auth import (
    MIN_PBKDF2_ITERATIONS,
    ROLES,
    USERS_ENV,
    USERS_FILE_ENV,
    AuthConfigError,
    Permission,
    authenticate,
    hash_password,
    load_users,
    role_allows,
    verify_password,
)

FAST = MIN_PBKDF2_ITERATIONS  # the cheapest hash the dashboard accepts


def test_pbkdf2_hash_verifies_only_the_right_password():
    stored = hash_password("s3cret", iterations=FAST)
    assert stored.startswith(f"pbkdf2_sha256${FAST}$")
    assert verify_password("s3cret", stored)
    assert not verify_password("s3cret ", stored)
    assert hash_password("s3cret", iterations=FAST) != stored  # salted


def test_a_bare_sha256_digest_is_refused_naming_the_user_not_the_hash():
    digest = hashlib.sha256(b"pw").hexdigest()
    assert not verify_password("pw", digest)
    with pytest.raises(AuthConfigError) as err:
        load_users({USERS_ENV: f"alice:ops:{hash_password('a', FAST)},bob:viewer:{digest}"})
    message = str(err.value)
    assert "(bob)" in message and "bare SHA-256" in message and "hash-password" in message
    assert digest not in message and digest.upper() not in message


@pytest.mark.parametrize(
    "stored, reason",
    [
        (f"pbkdf2_sha256$1000${'ab' * 16}${'cd' * 32}", "at least 100000 iterations"),
        (f"pbkdf2_sha256$200000${'ab' * 4}${'cd' * 32}", "salt is too short"),
        (f"pbkdf2_sha256$200000${'ab' * 16}${'cd' * 8}", "digest is not 64 hex"),
        ("md5$abc", "not a password hash"),
    ],
)
def test_weak_or_malformed_pbkdf2_hashes_are_refused(stored, reason):
    with pytest.raises(AuthConfigError, match=reason) as err:
        load_users({USERS_ENV: f"carol:finance:{stored}"})
    assert "(carol)" in str(err.value) and stored not in str(err.value)
    assert not verify_password("anything", stored)


def test_hash_password_will_not_make_a_hash_that_would_be_refused():
    with pytest.raises(ValueError, match="at least"):
        hash_password("pw", iterations=1000)


def test_users_from_env_and_file_with_roles_and_teams(tmp_path):
    file = tmp_path / "users"
    file.write_text(f"# ops\ncarol:ops:{hash_password('c', FAST)}\n\n")
    env = {
        USERS_ENV: f"alice:admin:{hash_password('a', FAST)}, "
        f"bob:finance:{hash_password('b', FAST)}:search-team",
        USERS_FILE_ENV: str(file),
    }
    users = load_users(env)
    assert {(u.name, u.role, u.team) for u in users.values()} == {
        ("alice", "admin", None),
        ("bob", "finance", "search-team"),
        ("carol", "ops", None),
    }
    assert authenticate(users, "bob", "b").team == "search-team"
    assert authenticate(users, "bob", "a") is None
    assert authenticate(users, "nobody", "a") is None


def test_roles_allow_what_the_docs_say():
    allowed = {role: {p for p in Permission if role_allows(role, p)} for role in ROLES}
    assert allowed["admin"] == set(Permission)
    assert allowed["finance"] == {
        Permission.SPEND,
        Permission.EXPORT,
        Permission.BUDGETS_VIEW,
        Permission.BUDGETS_EDIT,
        Permission.CUSTOMERS,
    }
    assert allowed["ops"] == {
        Permission.LATENCY,
        Permission.REQUESTS,
        Permission.ROUTING_VIEW,
        Permission.ROUTING_EDIT,
        Permission.BUDGETS_VIEW,
    }
    # read-only: sees spend, savings, latency, routing and budgets, changes and exports nothing
    assert allowed["viewer"] == {
        Permission.SPEND,
        Permission.LATENCY,
        Permission.ROUTING_VIEW,
        Permission.BUDGETS_VIEW,
    }
    assert not role_allows("nobody", Permission.SPEND)


def test_no_configuration_means_no_users():
    assert load_users({}) == {}


@pytest.mark.parametrize(
    "entry, message",
    [
        ("alice:root:" + hash_password("x", FAST), "role 'root'"),
        ("alice:ops", "expected name:role:hash"),
        ("alice:ops:plaintext-password", "not a password hash"),
        ("alice:ops:" + hash_password("x", FAST) + ":team:extra", "expected name:role:hash"),
    ],
)
def test_bad_entries_are_refused_without_echoing_secrets(entry, message):
    with pytest.raises(AuthConfigError, match=message) as err:
        load_users({USERS_ENV: entry})
    assert "plaintext-password" not in str(err.value) and "pbkdf2" not in str(err.value)


def test_a_name_listed_twice_is_refused():
    entry = f"alice:ops:{hash_password('a', FAST)}"
    with pytest.raises(AuthConfigError, match="listed twice"):
        load_users({USERS_ENV: f"{entry},{entry}"})


def test_unreadable_users_file_is_an_error(tmp_path):
    with pytest.raises(AuthConfigError, match="cannot read"):
        load_users({USERS_FILE_ENV: str(tmp_path / "missing")})


def test_user_repr_hides_the_hash():
    users = load_users({USERS_ENV: f"alice:ops:{hash_password('a', FAST)}"})
    assert "pbkdf2" not in repr(users["alice"])
