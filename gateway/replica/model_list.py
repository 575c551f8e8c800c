"""`GET /v1/models`: OpenAI's model list, with each model's prices and each alias's live
weights, so that an app (or finance) can see what a name costs before calling it."""

from __future__ import annotations

from typing import Any

from gateway.domain.config import Config
from gateway.domain.pricing import PriceCatalog
from gateway.domain.routing_settings import RoutingSettings
from gateway.replica.endpoints.spec import model_endpoints

# OpenAI's list needs a creation time; ours is the catalog's epoch, 2026-01-01
CREATED = 1_767_225_600
_RATES = ("input", "cached_input", "cache_write", "output", "reasoning")


def list_models(cfg: Config, routing: RoutingSettings, catalog: PriceCatalog) -> dict[str, Any]:
    data: list[dict[str, Any]] = []
    for m in cfg.models:
        entry: dict[str, Any] = {
            "id": m.name,
            "object": "model",
            "created": CREATED,
            "owned_by": m.provider,
            # the ingress APIs this model serves (its kind and its provider's wire format)
            "costgate_endpoints": sorted(model_endpoints(cfg, m)),
        }
        entry.update(price_info(catalog, m.name))
        data.append(entry)
    for name, alias in cfg.aliases.items():
        weights = routing.weights_for(name, cfg)
        data.append(
            {
                "id": name,
                "object": "model",
                "created": CREATED,
                "owned_by": "costgate",
                "costgate_endpoints": _alias_endpoints(cfg, [*alias.candidates]),
                "costgate_alias": {
                    "description": alias.description,
                    "weights": {k: str(v) for k, v in weights.items()},
                    "baseline": alias.baseline,
                },
            }
        )
    return {"object": "list", "data": data}


def _alias_endpoints(cfg: Config, candidates: list[str]) -> list[str]:
    """What an alias serves: an API any of its candidates serves (the plan keeps those)."""
    served: set[str] = set()
    for name in candidates:
        served |= model_endpoints(cfg, cfg.models_by_name[name])
    return sorted(served)


def price_info(catalog: PriceCatalog, model: str) -> dict[str, Any]:
    """The model's current list and billed prices per 1M tokens, as exact strings."""
    version = catalog.version(model)
    if version is None:
        return {}

    def rates(r: Any) -> dict[str, str | None]:
        return {
            name: None if getattr(r, name) is None else str(getattr(r, name)) for name in _RATES
        }

    return {
        "costgate_pricing": {
            "unit": "per 1M tokens",
            "list_usd": rates(version.list_rates),
            "actual_usd": rates(version.billed_usd_per_mtok()),
            "billing_currency": version.billing_currency,
            "actual": rates(version.billed_rates),
            "effective_from": version.effective_from.isoformat(),
            "price_version_id": str(version.id),
        }
    }
