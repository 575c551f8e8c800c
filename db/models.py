"""The ledger's tables, as SQLAlchemy 2 typed models.

Alembic migrations under `db/migrations/versions/` create exactly these (a test runs
autogenerate's comparison and expects no difference). Table and column names are a
contract: the record writer, the dashboard's SQL and the routing audit use them.

Money is NUMERIC (`Money`: 10 decimal places, see `gateway.domain.pricing` for the rounding),
never float. Timestamps are timestamptz in UTC.

`usage_records.price_version_id` is not a foreign key: a record is a fact about a bill
that already happened, written even before the price sync ran (ids are deterministic,
uuid5 of their content). Nor are `app`/`team`/`key_id`: the `anonymous` app and static
keys have no rows in `apps`/`api_keys`.
"""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from typing import Any

from sqlalchemy import (
    ARRAY,
    BigInteger,
    Boolean,
    CheckConstraint,
    Date,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    Numeric,
    Text,
    UniqueConstraint,
    Uuid,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# Per-record amounts and per-1M-token prices. 10 places hold a single token's cost
# exactly at any realistic price; 20 digits leave 10 for whole units (billions).
Money = Numeric(20, 10)
NullableJSONB = JSONB(none_as_null=True)  # None as SQL NULL, not JSON 'null'
_NO_PATH, _NO_TIERS = text("'{}'::text[]"), text("'[]'::jsonb")

# Explicit constraint names keep migrations and autogenerate comparisons stable.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# Kept in step with gateway.domain.usage_record.RequestStatus / UsageSource (a test checks).
REQUEST_STATUSES = ("ok", "client_error", "upstream_error", "cancelled")
USAGE_SOURCES = ("provider", "estimated", "missing")
# Kept in step with gateway.domain.endpoints.Endpoint (a test checks).
ENDPOINTS = ("chat.completions", "completions", "embeddings", "responses", "messages", "batch")
# a routing change: sent and not yet settled, live everywhere, refused, or not confirmed
ROUTING_STATUSES = ("pending", "applied", "failed", "timed_out")


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


def _now() -> Any:
    return mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())


class UsageRow(Base):
    """One row per client request: one column per field of `UsageRecord` (domain)."""

    __tablename__ = "usage_records"

    # partitioned by week (0015, db/partitions): the key must hold the partition key
    request_id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    started_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), primary_key=True)
    ended_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))
    app: Mapped[str] = mapped_column(Text)
    team: Mapped[str | None] = mapped_column(Text)
    key_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    requested_model: Mapped[str] = mapped_column(Text)
    alias: Mapped[str | None] = mapped_column(Text)
    model: Mapped[str | None] = mapped_column(Text)
    provider: Mapped[str | None] = mapped_column(Text)
    stream: Mapped[bool] = mapped_column(Boolean)
    status: Mapped[str] = mapped_column(Text)
    http_status: Mapped[int] = mapped_column(Integer)
    error_class: Mapped[str | None] = mapped_column(Text)
    prompt_tokens: Mapped[int | None] = mapped_column(Integer)
    cached_prompt_tokens: Mapped[int | None] = mapped_column(Integer)
    completion_tokens: Mapped[int | None] = mapped_column(Integer)
    reasoning_tokens: Mapped[int | None] = mapped_column(Integer)
    usage_source: Mapped[str] = mapped_column(Text)
    latency_ms: Mapped[int] = mapped_column(Integer)
    ttft_ms: Mapped[int | None] = mapped_column(Integer)
    upstream_latency_ms: Mapped[int | None] = mapped_column(Integer)
    attempts: Mapped[int] = mapped_column(Integer)
    fallback_path: Mapped[list[str]] = mapped_column(ARRAY(Text), server_default=_NO_PATH)
    routing_policy: Mapped[str | None] = mapped_column(Text)
    price_version_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    billing_currency: Mapped[str | None] = mapped_column(Text)
    actual_cost: Mapped[Decimal | None] = mapped_column(Money)
    actual_cost_usd: Mapped[Decimal | None] = mapped_column(Money)
    list_cost_usd: Mapped[Decimal | None] = mapped_column(Money)
    baseline_model: Mapped[str | None] = mapped_column(Text)
    baseline_cost_usd: Mapped[Decimal | None] = mapped_column(Money)
    endpoint: Mapped[str] = mapped_column(Text, server_default=text("'chat.completions'"))
    cache_write_tokens: Mapped[int | None] = mapped_column(Integer)
    # answered from the response cache (actual cost 0); prompt tokens trimming dropped
    cache_hit: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    trimmed_tokens: Mapped[int | None] = mapped_column(Integer)
    end_user: Mapped[str | None] = mapped_column(Text)  # plain, HMAC or tombstone
    session_id: Mapped[str | None] = mapped_column(Text)
    tags: Mapped[dict[str, str] | None] = mapped_column(NullableJSONB)
    # quality signals (gateway.quality.signals; None: not applicable), the A/B arm it served
    finish_reason: Mapped[str | None] = mapped_column(Text)
    refusal: Mapped[bool | None] = mapped_column(Boolean)
    json_valid: Mapped[bool | None] = mapped_column(Boolean)
    tool_args_valid: Mapped[bool | None] = mapped_column(Boolean)
    experiment: Mapped[str | None] = mapped_column(Text)
    variant: Mapped[str | None] = mapped_column(Text)
    # the tier the provider served (None: standard), web searches, their fees (in actual_cost)
    service_tier: Mapped[str | None] = mapped_column(Text)
    web_search_calls: Mapped[int | None] = mapped_column(Integer)
    tool_fee_cost: Mapped[Decimal | None] = mapped_column(Money)

    __table_args__ = (
        CheckConstraint(_in("status", REQUEST_STATUSES), name="status"),
        CheckConstraint(_in("usage_source", USAGE_SOURCES), name="usage_source"),
        CheckConstraint(_in("endpoint", ENDPOINTS), name="endpoint"),
        # time ranges and app budgets; model/provider slices are the rollups' (docs/ROLLUPS.md)
        Index("ix_usage_records_started_at", "started_at"),
        Index("ix_usage_records_app_started_at", "app", "started_at"),
        Index("ix_usage_records_end_user_started_at", "end_user", "started_at",  # budgets, erasure
              postgresql_where=text("end_user IS NOT NULL")),  # fmt: skip
        Index("ix_usage_records_web_search_started_at", "started_at",  # What-if's fees
              postgresql_where=text("web_search_calls > 0")),  # fmt: skip
        {"postgresql_partition_by": "RANGE (started_at)"},
    )


class PriceVersion(Base):
    """Everything needed to price a request on one (provider, model), as of a date. List
    prices: USD per 1M tokens; billed: per 1M in `billing_currency`, resolved from the
    billing rule and FX in force. Tiers: [{"above_prompt_tokens", "input", ...}] strings."""

    __tablename__ = "price_versions"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    provider: Mapped[str] = mapped_column(Text)
    model: Mapped[str] = mapped_column(Text)  # the public model name
    upstream_model: Mapped[str] = mapped_column(Text)
    effective_from: Mapped[dt.date] = mapped_column(Date)
    list_input: Mapped[Decimal] = mapped_column(Money)
    list_cached_input: Mapped[Decimal | None] = mapped_column(Money)
    list_cache_write: Mapped[Decimal | None] = mapped_column(Money)
    list_output: Mapped[Decimal] = mapped_column(Money)
    list_reasoning: Mapped[Decimal | None] = mapped_column(Money)
    list_tiers: Mapped[list[dict[str, Any]]] = mapped_column(JSONB, server_default=_NO_TIERS)
    billing_rule: Mapped[str] = mapped_column(Text)  # "multiplier" | "price_table"
    billing_currency: Mapped[str] = mapped_column(Text)
    fx_per_usd: Mapped[Decimal] = mapped_column(Money)
    multiplier: Mapped[Decimal | None] = mapped_column(Money)
    billed_input: Mapped[Decimal] = mapped_column(Money)
    billed_cached_input: Mapped[Decimal | None] = mapped_column(Money)
    billed_cache_write: Mapped[Decimal | None] = mapped_column(Money)
    billed_output: Mapped[Decimal] = mapped_column(Money)
    billed_reasoning: Mapped[Decimal | None] = mapped_column(Money)
    billed_tiers: Mapped[list[dict[str, Any]]] = mapped_column(JSONB, server_default=_NO_TIERS)
    list_extras: Mapped[dict[str, Any] | None] = mapped_column(NullableJSONB)
    billed_extras: Mapped[dict[str, Any] | None] = mapped_column(NullableJSONB)
    created_at: Mapped[dt.datetime] = _now()

    __table_args__ = (
        CheckConstraint(_in("billing_rule", ("multiplier", "price_table")), name="billing_rule"),
        Index("ix_price_versions_provider_model", "provider", "model", "effective_from"),
    )


class ProviderBilling(Base):
    """A provider's billing rule as last synced from the config (history is in price_versions)."""

    __tablename__ = "provider_billing"

    provider: Mapped[str] = mapped_column(Text, primary_key=True)
    currency: Mapped[str] = mapped_column(Text)
    fx_per_usd: Mapped[Decimal] = mapped_column(Money)
    multiplier: Mapped[Decimal] = mapped_column(Money)
    # upstream model id -> prices in `currency` (decimal strings), as in the config
    price_table: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    updated_at: Mapped[dt.datetime] = _now()


class Team(Base):
    __tablename__ = "teams"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    name: Mapped[str] = mapped_column(Text, unique=True)
    created_at: Mapped[dt.datetime] = _now()


class App(Base):
    __tablename__ = "apps"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    name: Mapped[str] = mapped_column(Text, unique=True)
    team_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("teams.id"))
    created_at: Mapped[dt.datetime] = _now()


class ApiKey(Base):
    """A gateway key: only its hash is stored; the key itself is shown once at creation."""

    __tablename__ = "api_keys"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    app_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("apps.id"))
    key_hash: Mapped[str] = mapped_column(Text, unique=True)
    prefix: Mapped[str] = mapped_column(Text)  # the first characters, to tell keys apart
    created_at: Mapped[dt.datetime] = _now()
    revoked_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    # the key's scope: models and aliases it may name (NULL: any), its largest `n` and
    # output-token cap (NULL: none), and when it stops working (NULL: never)
    allowed_models: Mapped[list[str] | None] = mapped_column(JSONB)
    max_n: Mapped[int | None] = mapped_column(Integer)
    max_output_tokens: Mapped[int | None] = mapped_column(Integer)
    expires_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    # an admin key reaches the administrative and reporting endpoints
    is_admin: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    # requests and tokens per minute across every replica (NULL: no limit)
    rpm_limit: Mapped[int | None] = mapped_column(Integer)
    tpm_limit: Mapped[int | None] = mapped_column(Integer)
    default_tags: Mapped[dict[str, str] | None] = mapped_column(NullableJSONB)  # per request
    allowed_tag_keys: Mapped[list[str] | None] = mapped_column(NullableJSONB)  # NULL: any
    user_rpm_limit: Mapped[int | None] = mapped_column(Integer)
    user_tpm_limit: Mapped[int | None] = mapped_column(Integer)


class RoutingChange(Base):
    """The audit trail of live routing updates (written by `db.routing_audit`)."""

    __tablename__ = "routing_changes"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    changed_at: Mapped[dt.datetime] = _now()
    actor: Mapped[str] = mapped_column(Text)
    app_name: Mapped[str] = mapped_column(Text)  # the Serve application
    alias: Mapped[str | None] = mapped_column(Text)
    before: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    after: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    note: Mapped[str | None] = mapped_column(Text)
    # written as `pending` before the change is sent, updated with its outcome
    status: Mapped[str] = mapped_column(Text, server_default=text("'applied'"))
    outcome_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    version_before: Mapped[int | None] = mapped_column(Integer)
    version_after: Mapped[int | None] = mapped_column(Integer)

    __table_args__ = (
        Index("ix_routing_changes_changed_at", "changed_at"),
        CheckConstraint(_in("status", ROUTING_STATUSES), name="status"),
    )


# Kept in step with gateway.domain.budgets.BudgetScope / BudgetPeriod (a test checks).
BUDGET_SCOPES = ("app", "team", "key", "all", "each_user", "tag")
BUDGET_PERIODS = ("day", "week", "month")


class BudgetRow(Base):
    """A spending limit (written by `db.budgets`); `scope_value` is "" for `all`."""

    __tablename__ = "budgets"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    scope: Mapped[str] = mapped_column(Text)
    scope_value: Mapped[str] = mapped_column(Text)
    period: Mapped[str] = mapped_column(Text)
    limit_usd: Mapped[Decimal] = mapped_column(Money)
    hard: Mapped[bool] = mapped_column(Boolean)
    alert_at: Mapped[list[int]] = mapped_column(ARRAY(Integer))
    created_at: Mapped[dt.datetime] = _now()
    updated_at: Mapped[dt.datetime] = _now()

    __table_args__ = (
        UniqueConstraint("scope", "scope_value", "period"),
        CheckConstraint(_in("scope", BUDGET_SCOPES), name="scope"),
        CheckConstraint(_in("period", BUDGET_PERIODS), name="period"),
    )


class BudgetChange(Base):
    """The audit trail of budgets: one row per set or remove, with before and after."""

    __tablename__ = "budget_changes"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    budget_id: Mapped[int] = mapped_column(BigInteger)  # no FK: a removal keeps its trail
    scope: Mapped[str] = mapped_column(Text)
    scope_value: Mapped[str] = mapped_column(Text)
    period: Mapped[str] = mapped_column(Text)
    actor: Mapped[str] = mapped_column(Text)
    changed_at: Mapped[dt.datetime] = _now()
    before: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    after: Mapped[dict[str, Any] | None] = mapped_column(JSONB)

    __table_args__ = (Index("ix_budget_changes_changed_at", "changed_at"),)


class BudgetAlert(Base):
    """One webhook per (budget, period, threshold): the row is the once-only guard."""

    __tablename__ = "budget_alerts"

    budget_id: Mapped[int] = mapped_column(
        ForeignKey("budgets.id", ondelete="CASCADE"), primary_key=True
    )
    period_start: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), primary_key=True)
    threshold: Mapped[int] = mapped_column(Integer, primary_key=True)
    sent_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    attempts: Mapped[int] = mapped_column(Integer, server_default=text("0"))


class BudgetLease(Base):
    """The slice of a budget's period one replica (`holder`) holds, and what it settled.

    `held_usd` is reserved for that holder until `expires_at` (renewed on every sync; a
    dead replica's hold lapses). `settled_usd` is the actual cost the holder has reported
    so far this period, ahead of the ledger's batched writes (see docs/BUDGETS.md)."""

    __tablename__ = "budget_leases"

    budget_id: Mapped[int] = mapped_column(
        ForeignKey("budgets.id", ondelete="CASCADE"), primary_key=True
    )
    period_start: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), primary_key=True)
    # "" for the whole scope; an each-user budget: the end user (as stored)
    subject: Mapped[str] = mapped_column(Text, primary_key=True, server_default=text("''"))
    holder: Mapped[str] = mapped_column(Text, primary_key=True)
    held_usd: Mapped[Decimal] = mapped_column(Money, server_default=text("0"))
    settled_usd: Mapped[Decimal] = mapped_column(Money, server_default=text("0"))
    created_at: Mapped[dt.datetime] = _now()
    expires_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))


class LimitBucket(Base):
    """A token bucket shared by every replica (a key's or a model's rpm or tpm).

    `level` is what was left at `updated_at`; it refills at capacity per minute up to
    capacity. Replicas take slices out of it and put back what they did not use."""

    __tablename__ = "limit_buckets"

    name: Mapped[str] = mapped_column(Text, primary_key=True)  # "key:<id>:rpm", "model:<m>:tpm"
    level: Mapped[Decimal] = mapped_column(Numeric(20, 6))
    updated_at: Mapped[dt.datetime] = _now()


class FxRate(Base):
    """Units of `currency` per USD from `effective_from` on (written by `db.analytics.fx_store`)."""

    __tablename__ = "fx_rates"

    currency: Mapped[str] = mapped_column(Text, primary_key=True)
    effective_from: Mapped[dt.date] = mapped_column(Date, primary_key=True)
    per_usd: Mapped[Decimal] = mapped_column(Money)
    source: Mapped[str] = mapped_column(Text)  # "cli", "csv:<file name>", ...
    created_at: Mapped[dt.datetime] = _now()

    __table_args__ = (CheckConstraint("per_usd > 0", name="positive"),)


class InvoiceLine(Base):
    """One line of a provider's imported usage or cost export, in its own currency."""

    __tablename__ = "invoice_lines"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    import_id: Mapped[str] = mapped_column(Text)  # one per imported file
    source: Mapped[str] = mapped_column(Text)  # "openai" | "anthropic" | "generic"
    provider: Mapped[str] = mapped_column(Text)  # the config's provider name
    day: Mapped[dt.date] = mapped_column(Date)
    model: Mapped[str] = mapped_column(Text)  # normalised to the config's model names
    description: Mapped[str | None] = mapped_column(Text)
    amount: Mapped[Decimal] = mapped_column(Money)
    currency: Mapped[str] = mapped_column(Text)
    imported_at: Mapped[dt.datetime] = _now()

    __table_args__ = (Index("ix_invoice_lines_provider_day", "provider", "day"),)

