from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal

import pytest

from gateway.domain.config import Config, default_config_path, load_config
from gateway.domain.pricing import PriceCatalog
from gateway.finance.ledger_groups import LedgerGroup, Tokens


@pytest.fixture(scope="session")
def cfg() -> Config:
    return load_config(default_config_path())


@pytest.fixture(scope="session")
def catalog(cfg: Config) -> PriceCatalog:
    return PriceCatalog.from_config(cfg)


def group(
    catalog: PriceCatalog,
    model: str,
    tokens: Tokens,
    *,
    day: dt.date = dt.date(2026, 11, 3),
    app: str = "checkout",
    alias: str | None = None,
    requests: int = 1,
    cache_hit: bool = False,
) -> LedgerGroup:
    """A group priced exactly as the replica would price one request with these tokens."""
    v = catalog.versions[model]
    priced = catalog.price(model, tokens.usage())
    zero = Decimal(0)
    return LedgerGroup(
        day=day,
        app=app,
        team="payments",
        key_id=str(uuid.UUID(int=7)),
        alias=alias,
        model=model,
        provider=v.provider,
        version=v,
        cache_hit=cache_hit,
        requests=requests,
        tokens=tokens,
        list_cost_usd=priced.list_cost_usd,
        actual_cost=zero if cache_hit else priced.actual_cost,
        actual_cost_usd=zero if cache_hit else priced.actual_cost_usd,
    )
