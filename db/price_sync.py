"""Write the config's price versions and providers' billing rules into the database.

Idempotent: version ids are content hashes (`gateway.domain.pricing`), so running it again
inserts nothing, and a changed price adds a new version beside the old ones (records
priced with the old one still point at it). Each dated FX rate in `fx_rates` adds the
versions it makes (`gateway.finance.fx.dated_versions`): the ids replicas stamp on the
records they price at that rate. `provider_billing` holds each provider's rule
as last synced; it is updated only when it changed.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from sqlalchemy import Engine, func, or_, select
from sqlalchemy.dialects.postgresql import insert as pg_insert

from db.engine import engine_scope
from db.models import FxRate as FxRateRow
from db.models import PriceVersion as PriceVersionRow
from db.models import ProviderBilling
from gateway.domain.config import Config
from gateway.domain.pricing import PriceCatalog, PriceVersion
from gateway.finance.fx import FxRate, FxSchedule, dated_versions


@dataclasses.dataclass(frozen=True, slots=True)
class SyncResult:
    versions_inserted: int
    versions_total: int
    providers_changed: int


def price_version_row(v: PriceVersion) -> dict[str, Any]:
    lr, br = v.list_rates, v.billed_rates
    return {
        "id": v.id,
        "provider": v.provider,
        "model": v.model,
        "upstream_model": v.upstream_model,
        "effective_from": v.effective_from,
        "list_input": lr.input,
        "list_cached_input": lr.cached_input,
        "list_cache_write": lr.cache_write,
        "list_output": lr.output,
        "list_reasoning": lr.reasoning,
        "list_tiers": lr.tiers_json(),
        "billing_rule": v.billing_rule,
        "billing_currency": v.billing_currency,
        "fx_per_usd": v.fx_per_usd,
        "multiplier": v.multiplier,
        "billed_input": br.input,
        "billed_cached_input": br.cached_input,
        "billed_cache_write": br.cache_write,
        "billed_output": br.output,
        "billed_reasoning": br.reasoning,
        "billed_tiers": br.tiers_json(),
        "list_extras": lr.extras_json(),
        "billed_extras": br.extras_json(),
    }


def provider_billing_rows(cfg: Config) -> list[dict[str, Any]]:
    return [
        {
            "provider": p.name,
            "currency": p.billing.currency,
            "fx_per_usd": p.billing.fx_per_usd,
            "multiplier": p.billing.multiplier,
            # pydantic's JSON mode keeps Decimal prices as exact strings
            "price_table": {k: v.model_dump(mode="json") for k, v in p.billing.price_table.items()},
        }
        for p in cfg.providers
    ]


def sync_prices(engine_or_url: Engine | str | None, cfg: Config) -> SyncResult:
    catalog = PriceCatalog.from_config(cfg)
    billing = provider_billing_rows(cfg)
    with engine_scope(engine_or_url) as engine, engine.begin() as conn:
        rates = conn.execute(
            select(FxRateRow.currency, FxRateRow.effective_from, FxRateRow.per_usd)
        ).all()
        dated = dated_versions(catalog, FxSchedule.of(FxRate(c, d, p) for c, d, p in rates))
        versions = [price_version_row(v) for v in [*catalog.versions.values(), *dated]]
        inserted = 0
        if versions:
            result = conn.execute(
                pg_insert(PriceVersionRow)
                .values(versions)
                .on_conflict_do_nothing(index_elements=["id"])
                .returning(PriceVersionRow.id)
            )
            inserted = len(result.all())
        upsert = pg_insert(ProviderBilling).values(billing)
        changed_cols = ("currency", "fx_per_usd", "multiplier", "price_table")
        excluded = upsert.excluded
        upsert_changed = upsert.on_conflict_do_update(
            index_elements=["provider"],
            set_={**{c: excluded[c] for c in changed_cols}, "updated_at": func.now()},
            where=or_(
                *(getattr(ProviderBilling, c).is_distinct_from(excluded[c]) for c in changed_cols)
            ),
        ).returning(ProviderBilling.provider)
        providers_changed = len(conn.execute(upsert_changed).all())
    return SyncResult(inserted, len(versions), providers_changed)
