"""The live part of the configuration: what ops change without restarting replicas.

It travels as the ingress deployment's Serve `user_config` (plain JSON), and every
writer of it (`costgate routing set`, the dashboard) validates it here before anything
is sent: a `reconfigure()` that raises gets the replica replaced, and its successor
fails the same way.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from gateway.config import Config, format_validation_error


class RoutingError(ValueError):
    """Routing settings that must not be applied; the message says which and why."""


class PolicyWeights(BaseModel):
    """The `normal` priority's score: latency_weight × latency + cost_weight × cost."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    latency_weight: float = Field(default=0.4, ge=0)
    cost_weight: float = Field(default=0.6, ge=0)


class ModelCaps(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    rpm: int | None = Field(default=None, gt=0)
    tpm: int | None = Field(default=None, gt=0)


class RoutingSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    # alias -> model -> relative weight
    aliases: dict[str, dict[str, Decimal]]
    policy: PolicyWeights = PolicyWeights()
    caps: dict[str, ModelCaps] = Field(default_factory=dict)
    version: int = Field(default=1, ge=1)

    @field_validator("aliases")
    @classmethod
    def _weights(cls, v: dict[str, dict[str, Decimal]]) -> dict[str, dict[str, Decimal]]:
        for alias, weights in v.items():
            for model, w in weights.items():
                if w < 0:
                    raise ValueError(f"aliases.{alias}.{model}: weight {w} is negative")
            if not weights or sum(weights.values()) <= 0:
                raise ValueError(f"aliases.{alias}: every weight is 0; one must be above 0")
        return v

    def to_user_config(self) -> dict[str, Any]:
        return {"routing": self.model_dump(mode="json")}


def routing_from_config(cfg: Config) -> RoutingSettings:
    caps = {
        m.name: ModelCaps(rpm=m.rpm_limit, tpm=m.tpm_limit)
        for m in cfg.models
        if m.rpm_limit or m.tpm_limit
    }
    return RoutingSettings(
        aliases={name: dict(a.candidates) for name, a in cfg.aliases.items()}, caps=caps
    )


def parse_routing(user_config: dict[str, Any] | None, cfg: Config) -> RoutingSettings:
    """Validate a user_config against the static config; raise RoutingError if unusable."""
    if not user_config or "routing" not in user_config:
        return routing_from_config(cfg)
    try:
        settings = RoutingSettings.model_validate(user_config["routing"])
    except ValidationError as err:
        raise RoutingError(format_validation_error(err)) from None
    known = set(cfg.models_by_name)
    for alias, weights in settings.aliases.items():
        if alias not in cfg.aliases:
            raise RoutingError(f"aliases.{alias}: unknown alias {alias!r}")
        for model in weights:
            if model not in known:
                raise RoutingError(f"aliases.{alias}.{model}: unknown model {model!r}")
    for model in settings.caps:
        if model not in known:
            raise RoutingError(f"caps.{model}: unknown model {model!r}")
    return settings
