"""The config's price versions land in the database with the ids the gateway stamps."""

from __future__ import annotations

from decimal import Decimal

import pytest
from sqlalchemy import Engine, text

from db.price_sync import sync_prices
from gateway.domain.config import Config, default_config_path, load_config, parse_config
from gateway.domain.pricing import PriceCatalog, TokenUsage


@pytest.fixture(autouse=True)
def empty_price_tables(ledger_engine: Engine) -> None:
    with ledger_engine.begin() as conn:
        conn.execute(text("TRUNCATE price_versions, provider_billing"))


def _example_with_relay_fx(fx: str) -> Config:
    data = load_config(default_config_path()).model_dump(mode="json")
    for p in data["providers"]:
        if p["name"] == "relay":
            p["billing"]["fx_per_usd"] = fx
    return parse_config(data)


def test_sync_inserts_every_version_once_with_the_catalogs_ids(ledger_engine: Engine) -> None:
    cfg = load_config(default_config_path())
    catalog = PriceCatalog.from_config(cfg)
    first = sync_prices(ledger_engine, cfg)
    again = sync_prices(ledger_engine, cfg)
    assert again.versions_inserted == 0 and again.providers_changed == 0
    assert first.versions_total == len(catalog.versions)
    pid = catalog.price("relay-gpt-4.1", TokenUsage(completion_tokens=1)).price_version_id
    with ledger_engine.connect() as conn:
        row = conn.execute(
            text(
                "SELECT billing_currency, fx_per_usd, multiplier, list_output, billed_output"
                " FROM price_versions WHERE id = :id"
            ),
            {"id": pid},
        ).one()
    assert tuple(row) == ("CNY", Decimal("7.3"), Decimal(1), Decimal(8), Decimal(8))


def test_relay_price_table_and_tiers_are_stored_exactly(ledger_engine: Engine) -> None:
    sync_prices(ledger_engine, load_config(default_config_path()))
    with ledger_engine.connect() as conn:
        table = conn.execute(
            text("SELECT price_table FROM provider_billing WHERE provider = 'relay'")
        ).scalar_one()
        tiers = conn.execute(
            text("SELECT list_tiers FROM price_versions WHERE model = 'gemini-2.5-pro'")
        ).scalar_one()
    assert table["deepseek-chat"]["output"] == "3.8"  # YAML read 3.80 as 3.8: the same price
    assert tiers == [
        {"above_prompt_tokens": 200000, "input": "2.5", "cached_input": "0.25", "output": "15"}
    ]


def test_a_changed_fx_rate_adds_new_versions_and_keeps_the_old_ones(
    ledger_engine: Engine,
) -> None:
    sync_prices(ledger_engine, load_config(default_config_path()))
    result = sync_prices(ledger_engine, _example_with_relay_fx("7.1"))
    assert result.versions_inserted == 3  # the three relay models
    assert result.providers_changed == 1
    with ledger_engine.connect() as conn:
        fxs = (
            conn.execute(
                text(
                    "SELECT DISTINCT fx_per_usd FROM price_versions WHERE provider = 'relay'"
                    " ORDER BY 1"
                )
            )
            .scalars()
            .all()
        )
        current = conn.execute(
            text("SELECT fx_per_usd FROM provider_billing WHERE provider = 'relay'")
        ).scalar_one()
    assert fxs == [Decimal("7.1"), Decimal("7.3")]
    assert current == Decimal("7.1")
