"""Gateway keys: shown once, stored as hashes, attributed to app and team, revocable,
with their scope."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import Engine, text

from db.keys import (
    KeyLookupError,
    create_key,
    hash_key,
    list_keys,
    load_active_key,
    load_active_keys,
    revoke_key,
)

pytestmark = pytest.mark.usefixtures("clean_ledger")


def test_created_key_authenticates_as_its_app_and_team(ledger_engine: Engine) -> None:
    key, listing = create_key(ledger_engine, "checkout", team="payments")
    assert key.startswith("cg-") and len(key) > 40
    info = load_active_keys(ledger_engine)[hash_key(key)]
    assert (info.key_id, info.app, info.team) == (listing.key_id, "checkout", "payments")


def test_only_the_hash_is_stored_never_the_key(ledger_engine: Engine) -> None:
    key, _ = create_key(ledger_engine, "checkout")
    with ledger_engine.connect() as conn:
        dump = conn.execute(text("SELECT row_to_json(k)::text FROM api_keys k")).scalar_one()
    assert key not in dump
    assert hash_key(key) in dump


def test_listing_shows_a_prefix_app_team_and_revocation(ledger_engine: Engine) -> None:
    key, created = create_key(ledger_engine, "search")
    (listed,) = list_keys(ledger_engine)
    assert listed == created
    assert key.startswith(listed.prefix) and len(listed.prefix) < 12
    assert listed.app == "search" and listed.team is None and listed.revoked_at is None


def test_revoked_key_no_longer_authenticates_but_is_still_listed(ledger_engine: Engine) -> None:
    key, created = create_key(ledger_engine, "search")
    other, _ = create_key(ledger_engine, "search")
    revoked = revoke_key(ledger_engine, str(created.key_id)[:8])
    assert revoked.revoked_at is not None
    active = load_active_keys(ledger_engine)
    assert hash_key(key) not in active and hash_key(other) in active
    assert len(list_keys(ledger_engine)) == 2
    assert len(list_keys(ledger_engine, include_revoked=False)) == 1


def test_one_key_is_loaded_by_its_hash_as_in_the_whole_set_and_not_once_revoked(
    ledger_engine: Engine,
) -> None:
    key, created = create_key(ledger_engine, "search", team="web", max_n=2)
    assert load_active_key(ledger_engine, hash_key(key)) == load_active_keys(ledger_engine)[
        hash_key(key)
    ]
    assert load_active_key(ledger_engine, hash_key("cg-never-made")) is None
    revoke_key(ledger_engine, str(created.key_id))
    assert load_active_key(ledger_engine, hash_key(key)) is None


def test_revoking_an_unknown_id_says_so(ledger_engine: Engine) -> None:
    with pytest.raises(KeyLookupError, match="no key"):
        revoke_key(ledger_engine, "00000000-0000-0000-0000-000000000000")


def test_second_key_for_an_app_with_a_team_moves_the_app_to_that_team(
    ledger_engine: Engine,
) -> None:
    first, _ = create_key(ledger_engine, "reports")
    second, _ = create_key(ledger_engine, "reports", team="finance")
    active = load_active_keys(ledger_engine)
    assert active[hash_key(first)].team == "finance"
    assert active[hash_key(second)].app == "reports"


def test_store_functions_accept_a_url_as_well_as_an_engine(database_url: str) -> None:
    key, _ = create_key(database_url, "cli")
    assert hash_key(key) in load_active_keys(database_url)


def test_a_keys_scope_is_stored_listed_and_loaded_with_it(ledger_engine: Engine) -> None:
    expires = dt.datetime(2031, 5, 1, tzinfo=dt.UTC)
    key, created = create_key(
        ledger_engine,
        "scoped",
        allowed_models=["fast", " gpt-4.1 ", "fast"],
        max_n=2,
        max_output_tokens=512,
        expires_at=expires,
    )
    info = load_active_keys(ledger_engine)[hash_key(key)]
    assert info.allowed_models == ("fast", "gpt-4.1")  # stripped, de-duplicated, in order
    assert (info.max_n, info.max_output_tokens, info.expires_at) == (2, 512, expires)
    assert not info.is_admin
    (listed,) = list_keys(ledger_engine)
    assert listed == created and listed.allowed_models == ("fast", "gpt-4.1")
    with ledger_engine.connect() as conn:
        stored = conn.execute(text("SELECT allowed_models FROM api_keys")).scalar_one()
    assert stored == ["fast", "gpt-4.1"]  # JSONB list


def test_an_unscoped_key_is_unlimited_and_an_admin_key_says_so(ledger_engine: Engine) -> None:
    plain, _ = create_key(ledger_engine, "plain")
    admin, listing = create_key(ledger_engine, "ops", is_admin=True)
    active = load_active_keys(ledger_engine)
    p = active[hash_key(plain)]
    assert (p.allowed_models, p.max_n, p.max_output_tokens, p.expires_at, p.is_admin) == (
        None,
        None,
        None,
        None,
        False,
    )
    assert active[hash_key(admin)].is_admin and listing.is_admin


@pytest.mark.parametrize(
    ("scope", "message"),
    [
        ({"allowed_models": []}, "at least one model"),
        ({"allowed_models": [" "]}, "at least one model"),
        ({"max_n": 0}, "max_n must be at least 1"),
        ({"max_output_tokens": -5}, "max_output_tokens must be at least 1"),
        ({"expires_at": dt.datetime(2031, 1, 1)}, "time zone"),
    ],
)
def test_a_scope_that_would_make_a_dead_or_ambiguous_key_is_refused(
    ledger_engine: Engine, scope: dict, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        create_key(ledger_engine, "bad", **scope)
    assert list_keys(ledger_engine) == []


def test_one_string_is_not_taken_for_a_list_of_model_names(ledger_engine: Engine) -> None:
    with pytest.raises(TypeError):
        create_key(ledger_engine, "bad", allowed_models="gpt-4o")


def test_default_tags_allowed_tag_keys_and_per_user_limits_round_trip(
    ledger_engine: Engine,
) -> None:
    key, created = create_key(
        ledger_engine,
        "assistant",
        default_tags={"env": "prod", "feature": ""},
        allowed_tag_keys=["feature", "tenant", "feature"],
        user_rpm_limit=30,
        user_tpm_limit=20_000,
    )
    info = load_active_keys(ledger_engine)[hash_key(key)]
    assert info.default_tags == {"env": "prod", "feature": ""}
    assert info.allowed_tag_keys == ("feature", "tenant")  # de-duplicated, in order
    assert (info.user_rpm_limit, info.user_tpm_limit) == (30, 20_000)
    (listed,) = list_keys(ledger_engine)
    assert listed == created
    assert listed.default_tags == info.default_tags
    assert listed.allowed_tag_keys == ("feature", "tenant")
    assert (listed.user_rpm_limit, listed.user_tpm_limit) == (30, 20_000)
    with ledger_engine.connect() as conn:
        stored = conn.execute(text("SELECT default_tags, allowed_tag_keys FROM api_keys")).one()
    assert tuple(stored) == ({"env": "prod", "feature": ""}, ["feature", "tenant"])  # JSONB


def test_a_key_without_tags_or_user_limits_stores_none_and_an_empty_allow_list_is_kept(
    ledger_engine: Engine,
) -> None:
    plain, _ = create_key(ledger_engine, "plain", default_tags={})
    closed, _ = create_key(ledger_engine, "closed", allowed_tag_keys=[])
    active = load_active_keys(ledger_engine)
    p = active[hash_key(plain)]
    assert (p.default_tags, p.allowed_tag_keys, p.user_rpm_limit, p.user_tpm_limit) == (
        None, None, None, None)  # fmt: skip
    # no tag of the request's own: different from any tag (None)
    assert active[hash_key(closed)].allowed_tag_keys == ()


@pytest.mark.parametrize(
    ("attribution", "message"),
    [
        ({"default_tags": {f"k{i}": "v" for i in range(17)}}, "at most 16 default tags"),
        ({"default_tags": {"k" * 65: "v"}}, "at most 64"),
        ({"default_tags": {"": "v"}}, "must not be empty"),
        ({"default_tags": {"env": "v" * 513}}, "at most 512"),
        ({"default_tags": {"env": "a\nb"}}, "printable"),
        ({"default_tags": {"env": 3}}, "must be strings"),
        ({"allowed_tag_keys": ["ok", "x" * 65]}, "at most 64"),
        ({"allowed_tag_keys": ["bad\tkey"]}, "printable"),
        ({"allowed_tag_keys": [f"k{i}" for i in range(17)]}, "at most 16 allowed tag keys"),
        ({"user_rpm_limit": 0}, "user_rpm_limit must be at least 1"),
        ({"user_tpm_limit": -1}, "user_tpm_limit must be at least 1"),
    ],
)
def test_tags_and_user_limits_no_request_could_meet_are_refused(
    ledger_engine: Engine, attribution: dict, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        create_key(ledger_engine, "bad", **attribution)
    assert list_keys(ledger_engine) == []


def test_one_string_is_not_taken_for_a_list_of_tag_keys(ledger_engine: Engine) -> None:
    with pytest.raises(TypeError):
        create_key(ledger_engine, "bad", allowed_tag_keys="feature")
