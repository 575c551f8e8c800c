"""The `sim:` section of the configuration: how the upstream simulator behaves.

Validated here rather than in gateway/config.py because only the simulator reads it;
errors name key paths from the top of the file (`sim.models.gpt-4.1.ttft_ms`).
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from gateway.domain.config import Config, ConfigError, format_validation_error

FaultKind = Literal[
    "rate_limit",
    "error_500",
    "error_502",
    "error_503",
    "bad_request",
    "hang",
    "reset",
    "malformed",
    "no_usage",
    "mid_stream_reset",
    # answers that arrive whole but are worse (chat completions): what the gateway's
    # quality signals must catch (gateway.quality.signals)
    "truncate",  # cut at half its length, finish_reason "length"
    "bad_json",  # in JSON mode: JSON that does not parse
    "bad_tool_args",  # a tool call whose arguments parse but break the tool's schema
    "refusal",  # message.refusal set, no content
]
FAULT_KINDS: tuple[str, ...] = get_args(FaultKind)
QUALITY_FAULTS = frozenset({"truncate", "bad_json", "bad_tool_args", "refusal"})
REFUSAL_TEXT = "I'm sorry, but I can't help with that."

# a fault rule keyed by this name applies to every model without rules of its own kind
ANY_MODEL = "*"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _TokenRange(_Strict):
    completion_tokens: tuple[int, int] | None = None
    reasoning_tokens: tuple[int, int] | None = None

    @model_validator(mode="after")
    def _ordered(self) -> _TokenRange:
        for name in ("completion_tokens", "reasoning_tokens"):
            span = getattr(self, name)
            if span is not None and not 0 <= span[0] <= span[1]:
                raise ValueError(f"{name} must be [min, max] with 0 <= min <= max")
        return self


class BehaviourOverride(_TokenRange):
    """Per-model figures; whatever is left out comes from `sim.default`."""

    ttft_ms: float | None = Field(default=None, ge=0)
    per_token_ms: float | None = Field(default=None, ge=0)
    jitter: float | None = Field(default=None, ge=0, le=1)
    quality: float | None = Field(default=None, ge=0, le=1)


class Behaviour(_TokenRange):
    """Latencies in milliseconds; `jitter` is a fraction of each figure (0.2 = ±20%)."""

    ttft_ms: float = Field(default=120, ge=0)
    per_token_ms: float = Field(default=4, ge=0)
    jitter: float = Field(default=0.2, ge=0, le=1)
    completion_tokens: tuple[int, int] = (40, 220)
    # hidden reasoning tokens, billed inside completion_tokens like OpenAI's o-series
    reasoning_tokens: tuple[int, int] = (0, 0)
    # the chance a simulated user rates an answer up: the demo traffic and the tests send
    # that verdict through /v1/feedback (how often a model truncates or breaks JSON is a
    # quality fault's probability: `sim.faults`)
    quality: float = Field(default=0.8, ge=0, le=1)

    def merged(self, override: BehaviourOverride | None) -> Behaviour:
        if override is None:
            return self
        changes = {k: v for k, v in override.model_dump().items() if v is not None}
        return self.model_copy(update=changes)


class FaultSpec(_Strict):
    """One fault kind on one model: how often it fires, and for how many requests."""

    probability: float = Field(default=1.0, ge=0, le=1)
    # fire at most this many times, then stay silent (None: no limit)
    count: int | None = Field(default=None, ge=1)
    retry_after_s: float = Field(default=1.0, ge=0)  # rate_limit's Retry-After
    hang_s: float = Field(default=300.0, gt=0)  # hang: how long before answering anyway


class BatchSettings(_Strict):
    """The Batch APIs: how long a batch takes, and which of its lines fail."""

    delay_s: float = Field(default=2.0, ge=0)
    failed_custom_ids: tuple[str, ...] = ()


class SimSettings(_Strict):
    host: str = "127.0.0.1"
    port: int = Field(default=9100, gt=0, lt=65536)
    default: Behaviour = Behaviour()
    # upstream model id -> overrides of the default figures
    models: dict[str, BehaviourOverride] = Field(default_factory=dict)
    # upstream model id (or "*") -> fault kind -> spec
    faults: dict[str, dict[FaultKind, FaultSpec]] = Field(default_factory=dict)
    # prompts at least this long report their previously seen prefix as cached tokens
    prompt_cache_min_tokens: int = Field(default=1024, ge=1)
    seed: int | None = None
    batches: BatchSettings = BatchSettings()

    def behaviour(self, model: str) -> Behaviour:
        return self.default.merged(self.models.get(model))


class _Section(_Strict):
    # validating through a wrapper makes pydantic's error paths start with "sim."
    sim: SimSettings


def parse_sim_settings(data: Any) -> SimSettings:
    """Validate a `sim:` mapping (None means all defaults)."""
    try:
        return _Section.model_validate({"sim": data or {}}).sim
    except ValidationError as err:
        raise ConfigError(format_validation_error(err)) from None


def served_models(config: Config, settings: SimSettings) -> tuple[str, ...]:
    """Every upstream model id the configuration sends to a provider, plus tuned ones."""
    ids = dict.fromkeys(m.upstream_model for m in config.models)
    ids.update(dict.fromkeys(settings.models))
    return tuple(ids)
