"""End users as stored: plain, or an HMAC keyed by the configured secret (pure)."""

from __future__ import annotations

import pytest

from gateway.attribution.identity import EndUserIds, hashed, tombstone
from gateway.domain.config import ConfigError, parse_config
from tests.gateway.domain.test_config import EXAMPLE


def test_plain_ids_are_stored_as_sent() -> None:
    assert EndUserIds().stored("cust-1") == "cust-1"


def test_hashed_ids_group_the_same_customer_and_hide_the_id() -> None:
    ids = EndUserIds(b"secret")
    assert ids.stored("cust-1") == ids.stored("cust-1") == hashed("cust-1", b"secret")
    assert ids.stored("cust-1") != ids.stored("cust-2")
    assert "cust-1" not in ids.stored("cust-1") and ids.stored("cust-1").startswith("hmac:")
    assert EndUserIds(b"other").stored("cust-1") != ids.stored("cust-1")


def test_tombstones_are_new_each_time() -> None:
    assert tombstone() != tombstone() and tombstone().startswith("forgotten:")


def test_the_config_names_the_secrets_variable_and_refuses_it_unset(monkeypatch) -> None:
    hmac_on = {"end_user_hash": "hmac", "end_user_hash_key_env": "CG_TEST_USER_KEY"}
    cfg = parse_config(EXAMPLE | {"ledger": hmac_on})
    monkeypatch.delenv("CG_TEST_USER_KEY", raising=False)
    with pytest.raises(ValueError, match="CG_TEST_USER_KEY"):
        cfg.ledger.end_user_ids()
    monkeypatch.setenv("CG_TEST_USER_KEY", "s3cret")
    assert cfg.ledger.end_user_ids().stored("a") == hashed("a", b"s3cret")
    with pytest.raises(ConfigError, match="end_user_hash_key_env"):
        parse_config(EXAMPLE | {"ledger": {"end_user_hash": "hmac"}})
