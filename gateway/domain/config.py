"""The one YAML configuration file, validated with pydantic: the upstream world (providers,
models, prices, aliases) and the deployment. A bad file fails before anything starts, with
a message naming the key path and the offending value."""

from __future__ import annotations

from decimal import Decimal
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from gateway.attribution.identity import EndUserIds
from gateway.attribution.settings import EndUserHashOptions
from gateway.domain.environment import environment, is_loopback, secret_from_env
from gateway.domain.prices.sections import (
    Billing,
    NonNegDecimal,
    Prices,
    Strict,
)
from gateway.domain.ray_options import RayOptions
from gateway.domain.routing_target import RoutingTarget


class ConfigError(ValueError):
    """A configuration file that cannot be used; the message names key paths and values."""


_Strict = Strict  # one definition for every section (the price ones live apart)


class Timeouts(_Strict):
    """Seconds. `total` bounds a whole non-streaming call (and a stream until its headers);
    `read` bounds each gap in a stream; `stream_total` bounds a whole stream, so one that
    keeps trickling (or stalls just under `read`) still ends."""

    connect: float = Field(default=3.0, gt=0)
    read: float = Field(default=60.0, gt=0)
    total: float = Field(default=120.0, gt=0)
    stream_total: float = Field(default=600.0, gt=0)


class Provider(_Strict):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")
    # the wire format: OpenAI-compatible, Anthropic's native Messages, Gemini's native API
    kind: Literal["openai", "anthropic", "gemini"] = "openai"
    base_url: str = Field(pattern=r"^https?://")
    # the *name* of the environment variable that holds the key, never the key itself
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Z_][A-Z0-9_]*$")
    timeouts: Timeouts = Timeouts()
    max_connections: int = Field(default=512, gt=0)
    billing: Billing = Billing()

    def api_key(self) -> str | None:
        return secret_from_env(self.api_key_env) if self.api_key_env else None


class Model(_Strict):
    name: str = Field(min_length=1)
    provider: str
    upstream_model: str = Field(min_length=1)
    # a chat model serves chat, completions, Responses and Messages; an embedding model
    # serves embeddings only (gateway.domain.endpoints.KIND_ENDPOINTS)
    kind: Literal["chat", "embedding"] = "chat"
    list_prices: Prices | None = None
    fallbacks: tuple[str, ...] = ()
    rpm_limit: int | None = Field(default=None, gt=0)
    # the most output tokens the model produces: a budget's worst case for a request
    # without max_tokens (none: such a request is refused under a hard budget)
    max_output_tokens: int | None = Field(default=None, gt=0)
    tpm_limit: int | None = Field(default=None, gt=0)
    # prompt + output tokens the model takes (the provider's published limit); none: no
    # check, the upstream decides (gateway.domain.context_trim)
    context_window: int | None = Field(default=None, gt=0)
    # the most built-in tool calls (web searches) a request may make when it sets no
    # `max_tool_calls` (Responses) or `max_uses` (Anthropic's tool): a budget's worst case
    max_tool_calls: int | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _output_price_for_chat(self) -> Model:
        # a chat model priced without an output rate would bill its answers at $0
        p = self.list_prices
        if self.kind == "chat" and p is not None and "output" not in p.model_fields_set:
            raise ValueError("list_prices.output is required for a chat model")
        return self


class Alias(_Strict):
    description: str = ""
    # public model name -> weight; weights are relative, they need not sum to 100
    candidates: dict[str, NonNegDecimal]
    # the model an app would have called without the gateway: routing savings are against it
    baseline: str | None = None
    fallbacks: tuple[str, ...] = ()
    # a conversation over the window: refused, or trimmed (gateway.domain.context_trim);
    # the request's x-costgate-trim header overrides it
    trim: Literal["error", "drop_oldest", "middle_out"] = "error"
    # `quality`: the cheapest candidate whose feedback score over the window is at least
    # min_quality; the weights while fewer than min_feedback scores (gateway.routing.policy)
    policy: Literal["weighted", "quality"] = "weighted"
    min_quality: float = Field(default=0.8, ge=0, le=1)
    quality_window: str = Field(default="7d", pattern=r"^[1-9][0-9]{0,2}d$")
    min_feedback: int = Field(default=50, ge=1)

    @field_validator("candidates")
    @classmethod
    def _some_weight(cls, v: dict[str, Decimal]) -> dict[str, Decimal]:
        if not v:
            raise ValueError("an alias needs at least one candidate")
        if sum(v.values()) <= 0:
            raise ValueError("at least one candidate needs a weight above 0")
        return v


class Autoscaling(_Strict):
    min_replicas: int = Field(default=2, ge=1)
    max_replicas: int = Field(default=4, ge=1)
    target_ongoing_requests: int = Field(default=64, ge=1)

    @model_validator(mode="after")
    def _ordered(self) -> Autoscaling:
        if self.max_replicas < self.min_replicas:
            raise ValueError("max_replicas must be >= min_replicas")
        return self


class GatewayOptions(_Strict):
    host: str = "127.0.0.1"
    port: int = Field(default=8000, gt=0, lt=65536)
    app_name: str = "costgate"
    route_prefix: str = "/"
    # static replica count unless `autoscaling` is given
    num_replicas: int = Field(default=2, ge=1)
    autoscaling: Autoscaling | None = None
    # "haproxy": Serve's throughput-optimised mode, HAProxy in front of replicas that
    # serve HTTP themselves (one Python hop less); "proxy": Serve's Python proxy actor
    ingress: Literal["haproxy", "proxy"] = "haproxy"
    # I/O-bound: a replica mostly waits on upstreams, so it can hold many requests at once
    max_ongoing_requests: int = Field(default=256, ge=1)
    max_body_bytes: int = Field(default=4 * 1024 * 1024, gt=0)
    # false only to measure what recording costs: requests then leave no ledger row
    record_usage: bool = True
    # Serve's per-request access log: the ledger already holds every request, and the
    # log line costs CPU on the request path
    access_log: bool = False
    # Serve's own per-request HTTP metrics in HAProxy mode: 0.1-0.3 ms of CPU per request
    # (parsed in Python) for counts costgate's /metrics already has (docs/PERFORMANCE.md)
    serve_http_metrics: bool = False
    # how long Serve lets a replica that is shutting down (downscale, redeploy, `costgate
    # down`) finish: it drains the requests in flight, then flushes the ledger, then is
    # killed. Sized for the longest stream Serve lets run (http_options.request_timeout_s,
    # 900 s) plus the ledger's flush (up to 10 s) and the metrics' last push (up to 5 s):
    # a shorter one cuts long streams, whose rows then hold only partial usage. An idle
    # replica shuts down at once whatever this says
    graceful_shutdown_timeout_s: float = Field(default=920.0, ge=15)
    # HAProxy mode: how long a replica shutting down still takes connections (Serve's
    # ..._MIN_DRAINING_PERIOD_S); shorter ones cost rows in a chaos scenario (TESTING.md)
    drain_period_s: float = Field(default=30.0, ge=0)
    # a redeploy that replaces replicas: how many are replaced at a time (Serve's
    # rolling_update_percentage) and how many replacements may start before the replicas
    # they replace stop (max_surge_percent). Serve's defaults (20%, no surge) stop an old
    # replica first, then start its replacement, one after the other: capacity drops by
    # one replica for each replica's start, and 2 replicas were ready in 7.0-7.3 s. All at
    # once with surge, the old replicas serve until every new one runs: 4.3-4.8 s
    # (docs/PERFORMANCE.md), at the price of twice the replicas' memory meanwhile
    rollout_batch_percent: int = Field(default=100, gt=0, le=100)
    rollout_surge_percent: int = Field(default=100, ge=0, le=100)
    # at shutdown, rows that neither PostgreSQL nor the spool's disk takes (an outage and a
    # full disk) are tried this much longer before they count as lost; only that case waits
    ledger_stranded_wait_s: float = Field(default=120.0, ge=0)
    # every request needs a gateway key (Authorization: Bearer ...). Off, a request
    # without one is `anonymous`, but a key that is presented must still be a valid one
    require_keys: bool = True
    # keys off on an address other machines reach must be meant: this says it is
    allow_anonymous: bool = False
    # env var names whose values are accepted as keys of the `default` app (for bootstrapping)
    static_key_envs: tuple[str, ...] = ()
    # the *name* of the variable whose value /metrics then wants as its bearer token
    metrics_token_env: str | None = Field(default=None, pattern=r"^[A-Z_][A-Z0-9_]*$")
    ray: RayOptions = RayOptions()


class CacheOptions(_Strict):
    """The exact-match response cache (gateway.replica.cache). Opt-in: a request sends
    `x-costgate-cache: on`, or it names an alias or model listed here."""

    aliases: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    ttl_s: float = Field(default=300.0, gt=0)  # a request's Cache-Control: max-age wins
    max_bytes: int = Field(default=64 * 1024 * 1024, gt=0)  # the in-replica LRU's bound
    max_entry_bytes: int = Field(default=1024 * 1024, gt=0)  # larger answers: not stored
    # shared by every replica when set (else each replica has its LRU); a Redis slower
    # than the timeout, or down, is skipped: the request goes upstream, never fails
    redis_url: str | None = None
    redis_timeout_s: float = Field(default=0.05, gt=0)


class BatchOptions(_Strict):
    """The batch APIs (docs/BATCHES.md); files_dir None: `<state dir>/files`."""

    files_dir: str | None = None
    max_file_bytes: int = Field(default=200 * 1024 * 1024, gt=0)  # OpenAI's own limit
    max_lines: int = Field(default=50_000, gt=0)
    poll_s: float = Field(default=5.0, gt=0)  # how often the poll lease's holder asks


class LedgerOptions(_Strict, EndUserHashOptions):
    # raw rows older than this many days are pruned by `costgate rollups prune`, their
    # hourly and daily rollups kept (docs/ROLLUPS.md); None: every raw row is kept
    retention_days: int | None = Field(default=None, ge=1)
    # how often replicas reload dated FX rates (`costgate fx add`): never per request
    fx_refresh_s: float = Field(default=60.0, gt=0)

    def end_user_ids(self) -> EndUserIds:
        """End users as stored. Raises ValueError when hashing is on and its variable is
        unset: ids must never be stored in the clear by mistake."""
        name = self.end_user_key_env()
        if name is None:
            return EndUserIds()
        if not (secret := secret_from_env(name)):
            raise ValueError(f"ledger.end_user_hash_key_env: the variable {name} is not set")
        return EndUserIds(secret.encode())


class Config(_Strict):
    gateway: GatewayOptions = GatewayOptions()
    providers: tuple[Provider, ...]
    models: tuple[Model, ...]
    aliases: dict[str, Alias] = Field(default_factory=dict)
    cache: CacheOptions = CacheOptions()
    # where `costgate routing set` and the dashboard send a live change (Serve or KubeRay)
    routing: RoutingTarget = RoutingTarget()
    ledger: LedgerOptions = LedgerOptions()
    batches: BatchOptions = BatchOptions()  # Files, Batch and Message Batches APIs
    # behaviour of the upstream simulator; free-form here, validated by gateway.devtools.sim
    sim: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _references(self) -> Config:
        providers = [p.name for p in self.providers]
        _unique("providers", providers)
        names = [m.name for m in self.models]
        _unique("models", names)
        known = set(names)
        for i, model in enumerate(self.models):
            if model.provider not in providers:
                raise ValueError(
                    f"models.{i}.provider: unknown provider {model.provider!r} "
                    f"(known: {', '.join(providers)})"
                )
            for fb in model.fallbacks:
                if fb not in known:
                    raise ValueError(f"models.{i}.fallbacks: unknown model {fb!r}")
        kinds = {m.name: m.kind for m in self.models}
        for i, model in enumerate(self.models):
            for fb in model.fallbacks:
                if kinds[fb] != model.kind:
                    raise ValueError(
                        f"models.{i}.fallbacks: {fb!r} is a {kinds[fb]} model, "
                        f"{model.name!r} a {model.kind} model"
                    )
        for alias_name, alias in self.aliases.items():
            if alias_name in known:
                raise ValueError(f"aliases.{alias_name}: an alias cannot reuse a model's name")
            for cand in alias.candidates:
                if cand not in known:
                    raise ValueError(
                        f"aliases.{alias_name}.candidates.{cand}: unknown model {cand!r}"
                    )
            for fb in alias.fallbacks:
                if fb not in known:
                    raise ValueError(f"aliases.{alias_name}.fallbacks: unknown model {fb!r}")
            if alias.baseline is not None and alias.baseline not in known:
                raise ValueError(f"aliases.{alias_name}.baseline: unknown model {alias.baseline!r}")
            members = [*alias.candidates, *alias.fallbacks]
            if len({kinds[m] for m in members}) > 1:
                raise ValueError(
                    f"aliases.{alias_name}: mixes chat and embedding models "
                    f"({', '.join(f'{m}: {kinds[m]}' for m in members)})"
                )
        return self

    @model_validator(mode="after")
    def _keys_off_only_on_loopback(self) -> Config:
        # here rather than on GatewayOptions: a top-level error keeps its own key path
        g = self.gateway
        if g.require_keys and g.allow_anonymous:
            raise ValueError(
                "gateway.allow_anonymous: true has no effect while gateway.require_keys is "
                "true; set gateway.require_keys: false as well to let keyless requests in"
            )
        if not g.require_keys and not g.allow_anonymous and not is_loopback(g.host):
            raise ValueError(
                f"gateway.require_keys: false with gateway.host {g.host!r} lets anyone who "
                "reaches that address spend on the providers' keys; require keys, bind "
                "127.0.0.1, or set gateway.allow_anonymous: true to mean it"
            )
        return self

    # lookups used on the request path, built once per (immutable) config
    @cached_property
    def models_by_name(self) -> dict[str, Model]:
        return {m.name: m for m in self.models}

    @cached_property
    def providers_by_name(self) -> dict[str, Provider]:
        return {p.name: p for p in self.providers}

    def model(self, name: str) -> Model | None:
        return self.models_by_name.get(name)

    def provider(self, name: str) -> Provider:
        return self.providers_by_name[name]

    def public_names(self) -> list[str]:
        return [m.name for m in self.models] + list(self.aliases)


def _unique(path: str, names: list[str]) -> None:
    seen: set[str] = set()
    for i, n in enumerate(names):
        if n in seen:
            raise ValueError(f"{path}.{i}.name: duplicate name {n!r}")
        seen.add(n)


def format_validation_error(err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        path = ".".join(str(p) for p in e["loc"]) or "(top level)"
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "value_error" and ":" in msg and not e["loc"]:
            lines.append(f"  {msg}")
            continue
        value = e.get("input")
        shown = "" if isinstance(value, dict | list) else f" (got {value!r})"
        if any(str(p).endswith(("_env", "_envs")) for p in e["loc"]):
            # where a variable's name belongs, a wrong value is most often the secret itself
            shown = " (value not shown: give the variable's name, not its value)"
        lines.append(f"  {path}: {msg}{shown}")
    return "invalid configuration:\n" + "\n".join(lines)


def parse_config(data: Any) -> Config:
    if not isinstance(data, dict):
        raise ConfigError("invalid configuration: the top level must be a mapping")
    try:
        return Config.model_validate(data)
    except ValidationError as err:
        raise ConfigError(format_validation_error(err)) from None


def load_config(path: str | Path) -> Config:
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as err:
        raise ConfigError(f"cannot read configuration {p}: {err.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"{p}: not valid YAML: {err}") from None
    return parse_config(data)


def default_config_path() -> Path:
    """$COSTGATE_CONFIG, else the documented example the demo runs on."""
    return environment().config_file
