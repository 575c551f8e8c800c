"""Gateway keys: shown once, stored as hashes, attributed to app and team, revocable."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, text

from db.keys import (
    KeyLookupError,
    create_key,
    hash_key,
    list_keys,
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
