"""What the request path hands to the ledger: one immutable record per client request.

The request path fills it in (tokens, timings, routing, costs already priced by
`gateway.domain.pricing`), and `gateway.ledger.writer` batches it into PostgreSQL. It is plain
data with no I/O so that the writer can spool it to disk as JSON and replay it later.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import uuid
from decimal import Decimal
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import orjson

from gateway.domain import json_codec
from gateway.domain.endpoints import Endpoint

if TYPE_CHECKING:  # pricing builds on this module's types
    from gateway.domain.pricing import Pricing, TokenUsage


class UsageSource(StrEnum):
    PROVIDER = "provider"  # the upstream reported it
    ESTIMATED = "estimated"  # counted with a tokenizer (no usage, or a cancelled stream)
    MISSING = "missing"  # unknown: cost stays NULL, never $0


class RequestStatus(StrEnum):
    OK = "ok"
    CLIENT_ERROR = "client_error"  # the app's fault: 4xx
    UPSTREAM_ERROR = "upstream_error"  # every attempt failed
    CANCELLED = "cancelled"  # the client went away mid-stream


@dataclasses.dataclass(frozen=True, slots=True)
class UsageRecord:
    request_id: uuid.UUID
    started_at: dt.datetime  # UTC, timezone-aware
    ended_at: dt.datetime
    app: str
    team: str | None
    key_id: uuid.UUID | None  # the gateway key's id, never the key
    requested_model: str  # what the client asked for: a model or an alias
    alias: str | None
    model: str | None  # the public model that answered (or was last tried)
    provider: str | None
    stream: bool
    status: RequestStatus
    http_status: int
    error_class: str | None  # bounded vocabulary, e.g. "upstream_timeout", "rate_limited"
    prompt_tokens: int | None
    cached_prompt_tokens: int | None
    completion_tokens: int | None
    reasoning_tokens: int | None
    usage_source: UsageSource
    latency_ms: int
    ttft_ms: int | None
    upstream_latency_ms: int | None
    attempts: int
    fallback_path: tuple[str, ...]  # models tried, in order, the last one answered
    routing_policy: str | None  # e.g. "weighted", "high", "budget", "normal", "fixed"
    price_version_id: uuid.UUID | None
    billing_currency: str | None
    actual_cost: Decimal | None  # in billing_currency
    actual_cost_usd: Decimal | None
    list_cost_usd: Decimal | None
    baseline_model: str | None
    baseline_cost_usd: Decimal | None
    # added after the first ledger: defaults let spool lines written before them load
    endpoint: Endpoint = Endpoint.CHAT_COMPLETIONS  # the API the app called
    cache_write_tokens: int | None = None  # prompt tokens written to the cache (in prompt)
    cache_hit: bool = False  # answered from the gateway's response cache, not upstream
    trimmed_tokens: int | None = None  # prompt tokens context trimming dropped (None: none)
    # who and what it served below the key (gateway.attribution): the end user as stored
    # (plain or an HMAC), the session or trace id, key=value tags (None: none)
    end_user: str | None = None
    session_id: str | None = None
    tags: dict[str, str] | None = None
    # automatic quality signals (gateway.quality.signals), None where they do not apply:
    # the upstream's finish reason, a refusal, JSON-mode / structured-output validity, tool
    # call arguments against their schema; the experiment and variant it was routed by
    finish_reason: str | None = None
    refusal: bool | None = None
    json_valid: bool | None = None
    tool_args_valid: bool | None = None
    experiment: str | None = None
    variant: str | None = None
    # the service tier the provider served at (None: standard), the web search calls it
    # reported, and their fees: part of actual_cost, in billing_currency
    service_tier: str | None = None
    web_search_calls: int | None = None
    tool_fee_cost: Decimal | None = None

    def to_json(self) -> str:
        return self.to_json_bytes().decode("utf-8")

    def to_json_bytes(self) -> bytes:
        """One spool or journal line (without its newline): every answered request writes
        one, so orjson writes it, straight from the dataclass (UUIDs, datetimes, enums and
        tuples natively, as `to_dict` spells them; the Decimals as their exact strings).
        A dict built first cost as much as the encoding (issue 29)."""
        try:
            return orjson.dumps(self, default=_exact_decimal)
        except orjson.JSONEncodeError:
            # a lone surrogate (a client's model name can carry one): json escapes it
            return json.dumps(self.to_dict(), separators=(",", ":")).encode("ascii")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in _FIELD_NAMES:
            v = getattr(self, name)
            if isinstance(v, uuid.UUID | Decimal):
                v = str(v)
            elif isinstance(v, dt.datetime):
                v = v.isoformat()
            elif isinstance(v, tuple):
                v = list(v)
            out[name] = v
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> UsageRecord:
        kw: dict[str, Any] = dict(d)
        for name in ("request_id", "key_id", "price_version_id"):
            if kw.get(name) is not None:
                kw[name] = uuid.UUID(kw[name])
        for name in ("started_at", "ended_at"):
            kw[name] = dt.datetime.fromisoformat(kw[name])
        for name in ("actual_cost", "actual_cost_usd", "list_cost_usd", "baseline_cost_usd",
                     "tool_fee_cost"):
            if kw.get(name) is not None:
                kw[name] = Decimal(kw[name])
        kw["fallback_path"] = tuple(kw.get("fallback_path") or ())
        kw["status"] = RequestStatus(kw["status"])
        kw["usage_source"] = UsageSource(kw["usage_source"])
        kw["endpoint"] = Endpoint(kw.get("endpoint") or Endpoint.CHAT_COMPLETIONS)
        return cls(**kw)

    @classmethod
    def from_json(cls, line: str | bytes) -> UsageRecord:
        return cls.from_dict(json_codec.loads(line))


# read once: `dataclasses.fields` on every record cost more than the encoding itself
_FIELD_NAMES = tuple(f.name for f in dataclasses.fields(UsageRecord))


def _exact_decimal(value: object) -> str:
    """orjson's fallback for the one type of a record it does not write: a Decimal, as
    its exact string (never a float)."""
    if isinstance(value, Decimal):
        return str(value)
    raise TypeError


def measured_fields(
    usage: TokenUsage | None, priced: Pricing | None, baseline: str | None
) -> dict[str, Any]:
    """A row's tokens, tier, fees and costs, from its usage and their price (None:
    unknown, never 0); the live request's row and a batch line's are built alike."""
    calls = usage.web_search_calls if usage else None
    return {
        "prompt_tokens": usage.prompt_tokens if usage else None,
        "cached_prompt_tokens": usage.cached_prompt_tokens if usage else None,
        "completion_tokens": usage.completion_tokens if usage else None,
        "reasoning_tokens": usage.reasoning_tokens if usage else None,
        "cache_write_tokens": usage.cache_write_tokens if usage else None,
        "service_tier": usage.service_tier if usage else None,
        "web_search_calls": calls or None,
        "tool_fee_cost": priced.tool_fee_cost if priced and calls else None,
        "price_version_id": priced.price_version_id if priced else None,
        "billing_currency": priced.billing_currency if priced else None,
        "actual_cost": priced.actual_cost if priced else None,
        "actual_cost_usd": priced.actual_cost_usd if priced else None,
        "list_cost_usd": priced.list_cost_usd if priced else None,
        "baseline_model": baseline if priced else None,
        "baseline_cost_usd": priced.baseline_cost_usd if priced else None,
    }
