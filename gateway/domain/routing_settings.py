"""The live part of the configuration: what ops change without restarting replicas.

It travels as the ingress deployment's Serve `user_config` (plain JSON), and every
writer of it (`costgate routing set`, the dashboard) validates it here before anything
is sent: a `reconfigure()` that raises gets the replica replaced, and its successor
fails the same way.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from gateway.domain.config import Config, format_validation_error
from gateway.experiments.spec import NAME_PATTERN, Experiment


class RoutingError(ValueError):
    """Routing settings that must not be applied; the message says which and why."""


class _Live(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PolicyWeights(_Live):
    """The `normal` priority's score: latency_weight × latency + cost_weight × cost."""

    latency_weight: float = Field(default=0.4, ge=0)
    cost_weight: float = Field(default=0.6, ge=0)

    @model_validator(mode="after")
    def _not_both_zero(self) -> PolicyWeights:
        if self.latency_weight + self.cost_weight <= 0:
            raise ValueError("latency_weight and cost_weight cannot both be 0")
        return self


class ModelCaps(_Live):
    rpm: int | None = Field(default=None, gt=0)
    tpm: int | None = Field(default=None, gt=0)


class BreakerSettings(_Live):
    """When a (provider, model) circuit breaker opens, and how long it stays open.

    It opens when, over the last `window_s` seconds, at least `min_requests` attempts
    were made and the share of failures is at or above `error_rate`. After `cooldown_s`
    it lets one probe through; a probe that has not reported after `probe_timeout_s`
    (a cancelled request) frees the slot for another.
    """

    window_s: float = Field(default=30.0, gt=0)
    min_requests: int = Field(default=10, ge=1)
    error_rate: float = Field(default=0.5, gt=0, le=1)
    cooldown_s: float = Field(default=10.0, gt=0)
    probe_timeout_s: float = Field(default=30.0, gt=0)


class RetrySettings(_Live):
    """Attempts per client request, counting the first, across every model tried.

    Backoff is exponential with full jitter: attempt n waits a uniform random time in
    [0, min(max_delay_s, base_delay_s × 2^(n-1))]. A 429's Retry-After is honoured up
    to `retry_after_cap_s`; a longer one moves the request to the next model at once.
    """

    max_attempts: int = Field(default=3, ge=1, le=10)
    max_attempts_per_model: int = Field(default=2, ge=1, le=10)
    base_delay_s: float = Field(default=0.05, ge=0)
    max_delay_s: float = Field(default=1.0, ge=0)
    retry_after_cap_s: float = Field(default=2.0, ge=0)


class RoutingSettings(_Live):
    # alias -> model -> relative weight
    aliases: dict[str, dict[str, Decimal]]
    policy: PolicyWeights = PolicyWeights()
    caps: dict[str, ModelCaps] = Field(default_factory=dict)
    breaker: BreakerSettings = BreakerSettings()
    retries: RetrySettings = RetrySettings()
    version: int = Field(default=1, ge=1)
    # A/B experiments on alias mixes, by name (gateway.experiments; stopped ones kept)
    experiments: dict[str, Experiment] = Field(default_factory=dict)

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

    def weights_for(self, alias: str, cfg: Config) -> dict[str, Decimal]:
        """The live weights of an alias, or the static config's when the live set has none."""
        live = self.aliases.get(alias)
        if live is not None:
            return dict(live)
        static = cfg.aliases.get(alias)
        return dict(static.candidates) if static else {}

    def with_weights(self, alias: str, weights: Mapping[str, Decimal]) -> RoutingSettings:
        """A copy with one alias's weights replaced and the version moved on by one."""
        aliases = {**self.aliases, alias: dict(weights)}
        data = self.model_dump()
        data.update(aliases=aliases, version=self.version + 1)
        try:
            return RoutingSettings.model_validate(data)
        except ValidationError as err:
            raise RoutingError(format_validation_error(err)) from None


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
    _check_experiments(settings, cfg)
    return settings


def _check_experiments(settings: RoutingSettings, cfg: Config) -> None:
    running: set[str] = set()
    for name, exp in settings.experiments.items():
        where = f"experiments.{name}"
        if not re.match(NAME_PATTERN, name):
            raise RoutingError(f"{where}: a name is 1-64 letters, digits, '_', '.' or '-'")
        if exp.alias not in cfg.aliases:
            raise RoutingError(f"{where}: unknown alias {exp.alias!r}")
        for variant, weights in exp.variants.items():
            for model in weights:
                if model not in cfg.models_by_name:
                    raise RoutingError(f"{where}.{variant}: unknown model {model!r}")
        if exp.stopped_at is None:
            if exp.alias in running:
                raise RoutingError(f"{where}: alias {exp.alias!r} already has a running one")
            running.add(exp.alias)


def check_weights(alias: str, weights: Mapping[str, Decimal], cfg: Config) -> None:
    """Refuse weights for one alias that must not reach a replica, with a plain message.

    The same rules as parse_routing, said in the editor's and the CLI's terms.
    """
    if alias not in cfg.aliases:
        raise RoutingError(f"unknown alias {alias!r} (known: {', '.join(cfg.aliases)})")
    for model, w in weights.items():
        if model not in cfg.models_by_name:
            raise RoutingError(f"{alias}: unknown model {model!r}")
        if not w.is_finite():
            raise RoutingError(f"{alias}.{model}: weight {w} is not a number")
        if w < 0:
            raise RoutingError(f"{alias}.{model}: weight {w} is negative")
    if not weights or sum(weights.values()) <= 0:
        raise RoutingError(f"{alias}: every weight is 0; at least one must be above 0")


def parse_weight_args(pairs: list[str]) -> dict[str, Decimal]:
    """`MODEL=WEIGHT` arguments (the CLI's and the dashboard's form) into a weight map."""
    weights: dict[str, Decimal] = {}
    for pair in pairs:
        model, sep, raw = pair.partition("=")
        model = model.strip()
        if not sep or not model:
            raise RoutingError(f"{pair!r}: expected MODEL=WEIGHT")
        try:
            weight = Decimal(raw.strip())
        except InvalidOperation:
            raise RoutingError(f"{pair!r}: weight {raw!r} is not a number") from None
        if not weight.is_finite():
            raise RoutingError(f"{pair!r}: weight {raw!r} is not a number")
        if model in weights:
            raise RoutingError(f"{model}: given twice")
        weights[model] = weight
    if not weights:
        raise RoutingError("no weights given")
    return weights
