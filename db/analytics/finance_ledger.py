"""What the FOCUS export, the what-if and reconciliation read: the daily rollup
(docs/ROLLUPS.md) with each group's price version, and stored price versions.

Only priced groups (a price version and a list cost) are read: an unknown cost stays
unknown, it is not exported as 0. Rows whose price version was never synced into
`price_versions` cannot be re-priced either; `unpriced_requests` counts both.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from collections.abc import Iterator, Mapping
from decimal import Decimal
from typing import Any, cast

from sqlalchemy import Engine, RowMapping, text

from db.analytics.rollup_sql import USAGE_TABLES
from db.engine import engine_scope
from gateway.domain.pricing import PriceVersion, Rates, Tier, quantize_money
from gateway.finance.ledger_groups import LedgerGroup, Tokens
from gateway.finance.whatif import Scenario, VersionLookup, WhatIfRow, reprice

DAILY = USAGE_TABLES["day"]
_VERSION_COLUMNS = (
    "id, provider, model, upstream_model, effective_from, list_input, list_cached_input, "
    "list_cache_write, list_output, list_reasoning, list_tiers, billing_rule, "
    "billing_currency, fx_per_usd, multiplier, billed_input, billed_cached_input, "
    "billed_cache_write, billed_output, billed_reasoning, billed_tiers, list_extras, billed_extras"
)


def _tiers(raw: list[dict[str, Any]] | None) -> tuple[Tier, ...]:
    def d(v: object) -> Decimal | None:
        return None if v is None else Decimal(str(v))

    return tuple(
        Tier(
            int(t["above_prompt_tokens"]),
            Decimal(str(t["input"])),
            d(t.get("cached_input")),
            Decimal(str(t["output"])),
        )
        for t in raw or []
    )


def version_of(row: RowMapping | Mapping[str, Any]) -> PriceVersion:
    """A stored `price_versions` row as the domain's PriceVersion (same id)."""
    list_rates = Rates(
        row["list_input"],
        row["list_cached_input"],
        row["list_cache_write"],
        row["list_output"],
        row["list_reasoning"],
        _tiers(row["list_tiers"]),
    )
    list_rates = Rates.with_extras(list_rates, row.get("list_extras"))
    billed_rates = Rates(
        row["billed_input"],
        row["billed_cached_input"],
        row["billed_cache_write"],
        row["billed_output"],
        row["billed_reasoning"],
        _tiers(row["billed_tiers"]),
    )
    billed_rates = Rates.with_extras(billed_rates, row.get("billed_extras"))
    return PriceVersion(
        provider=row["provider"],
        model=row["model"],
        upstream_model=row["upstream_model"],
        effective_from=row["effective_from"],
        list_rates=list_rates,
        billing_rule=row["billing_rule"],
        billing_currency=row["billing_currency"],
        fx_per_usd=row["fx_per_usd"],
        multiplier=row["multiplier"],
        billed_rates=billed_rates,
    )


def load_versions(engine_or_url: Engine | str | None) -> dict[uuid.UUID, PriceVersion]:
    with engine_scope(engine_or_url) as engine, engine.connect() as conn:
        rows = conn.execute(text(f"SELECT {_VERSION_COLUMNS} FROM price_versions")).mappings()
        return {r["id"]: version_of(r) for r in rows}


def _bounds(start: dt.date, end: dt.date) -> dict[str, dt.datetime]:
    """[start, end] as whole UTC days."""
    lo = dt.datetime(start.year, start.month, start.day, tzinfo=dt.UTC)
    hi = dt.datetime(end.year, end.month, end.day, tzinfo=dt.UTC) + dt.timedelta(days=1)
    return {"lo": lo, "hi": hi}


_GROUPS_SQL = f"""
SELECT (r.bucket AT TIME ZONE 'UTC')::date AS day, r.app, r.team, r.key_id, r.alias,
       r.model, r.provider, r.price_version_id, r.endpoint = 'batch' AS batch,
       SUM(r.requests) AS requests, SUM(r.cache_hit_requests) AS cache_hits,
       SUM(r.prompt_tokens) AS prompt, SUM(r.cached_prompt_tokens) AS cached,
       SUM(r.cache_write_tokens) AS cache_write, SUM(r.completion_tokens) AS completion,
       SUM(r.reasoning_tokens) AS reasoning,
       SUM(r.list_cost_usd) AS list_cost_usd, SUM(r.actual_cost) AS actual_cost,
       SUM(r.actual_cost_usd) AS actual_cost_usd
FROM {DAILY} r
WHERE r.bucket >= :lo AND r.bucket < :hi
  AND r.price_version_id IS NOT NULL AND r.list_cost_usd IS NOT NULL
  AND r.actual_cost IS NOT NULL
GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9
ORDER BY 1, 2, 3, 4, 5, 6, 7, 8, 9
"""


# web search calls and fees per group, from raw rows: the rollups do not sum them (rows
# already pruned lose their FOCUS line; their cost stays in the token lines' totals)
_FEES_SQL = """
SELECT (date_trunc('day', r.started_at, 'UTC') AT TIME ZONE 'UTC')::date AS day, r.app,
       r.team, r.key_id, r.alias, r.model, r.provider, r.price_version_id,
       sum(r.web_search_calls) AS web_search_calls, sum(r.tool_fee_cost) AS tool_fee_cost
FROM usage_records r
WHERE r.started_at >= :lo AND r.started_at < :hi AND r.web_search_calls > 0
  AND r.price_version_id IS NOT NULL AND r.actual_cost IS NOT NULL AND NOT r.cache_hit
GROUP BY 1, 2, 3, 4, 5, 6, 7, 8
"""
_GROUP_KEY = ("day", "app", "team", "key_id", "alias", "model", "provider", "price_version_id")

END_USER_TAG = "costgate:end_user"  # the FOCUS Tags key of the end user


def split_column(split: str) -> tuple[str, str]:
    """`--split-by user|tag:KEY` -> (the FOCUS Tags key, the raw row's SQL expression; the
    tag key is bound as :split_key). ValueError names a bad one."""
    if split == "user":
        return END_USER_TAG, "r.end_user"
    if split.startswith("tag:") and 0 < len(split) - 4 <= 64:
        return split[4:], "r.tags ->> :split_key"
    raise ValueError(f"--split-by: user or tag:KEY, not {split[:40]!r}")


# the same groups from raw rows, split by an end user or a tag value: no rollup holds
# both the price version and the end user (docs/FINANCE.md: what it costs)
_SPLIT_SQL = """
SELECT (date_trunc('day', r.started_at, 'UTC') AT TIME ZONE 'UTC')::date AS day, r.app,
       r.team, r.key_id, r.alias, r.model, r.provider, r.price_version_id,
       r.endpoint = 'batch' AS batch, {split} AS split,
       count(*) AS requests, count(*) FILTER (WHERE r.cache_hit) AS cache_hits,
       coalesce(sum(r.prompt_tokens), 0) AS prompt,
       coalesce(sum(r.cached_prompt_tokens), 0) AS cached,
       coalesce(sum(r.cache_write_tokens), 0) AS cache_write,
       coalesce(sum(r.completion_tokens), 0) AS completion,
       coalesce(sum(r.reasoning_tokens), 0) AS reasoning,
       sum(r.list_cost_usd) AS list_cost_usd, sum(r.actual_cost) AS actual_cost,
       sum(r.actual_cost_usd) AS actual_cost_usd,
       coalesce(sum(r.web_search_calls), 0) AS web_search_calls,
       sum(r.tool_fee_cost) AS tool_fee_cost
FROM usage_records r
WHERE r.started_at >= :lo AND r.started_at < :hi
  AND r.price_version_id IS NOT NULL AND r.list_cost_usd IS NOT NULL
  AND r.actual_cost IS NOT NULL
GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10
ORDER BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10
"""


def ledger_groups(
    engine_or_url: Engine | str | None, start: dt.date, end: dt.date, split: str | None = None
) -> Iterator[LedgerGroup]:
    """Priced groups of the days `start` to `end` (inclusive), with their versions;
    `split` ("user" or "tag:KEY") splits them by end user or that tag's value, read from
    raw rows (ValueError when the period's raw rows were pruned).

    A group with response-cache hits is split in two by request count: the hits' share
    of its tokens as a cache-hit group (billed 0), the rest as billed; the rollup keeps
    hits' tokens inside the group, not apart (docs/FINANCE.md)."""
    params: dict[str, Any] = dict(_bounds(start, end))
    sql, tag_key = _GROUPS_SQL, ""
    if split is not None:
        tag_key, expr = split_column(split)
        sql = _SPLIT_SQL.format(split=expr)
        params["split_key"] = tag_key
    with engine_scope(engine_or_url) as engine:
        versions = load_versions(engine)
        with engine.connect() as conn:
            if split is not None:
                horizon = conn.execute(text("SELECT pruned_before FROM usage_rollup_state"))
                pruned = horizon.scalar()
                if pruned is not None and params["lo"] < pruned:
                    raise ValueError(
                        f"raw rows before {pruned:%Y-%m-%d} were pruned: --split-by needs them"
                    )
            rows = conn.execute(text(sql), params).mappings().all()
            fees = {} if split is not None else {
                tuple(f[k] for k in _GROUP_KEY): f
                for f in conn.execute(text(_FEES_SQL), params).mappings()
            }  # fmt: skip
    for raw in rows:
        fee = fees.get(tuple(raw[k] for k in _GROUP_KEY))
        r = cast(Mapping[str, Any], raw if fee is None else {**raw, **fee})
        version = versions.get(r["price_version_id"])
        if version is None:
            continue
        tags = ((tag_key, r["split"]),) if split is not None and r["split"] is not None else ()
        yield from _split_hits(r, version, tags)


def _split_hits(
    r: RowMapping | Mapping[str, Any], version: PriceVersion, tags: tuple[tuple[str, str], ...] = ()
) -> Iterator[LedgerGroup]:
    tokens = Tokens.of_usage_sums(
        int(r["prompt"]),
        int(r["cached"]),
        int(r["cache_write"]),
        int(r["completion"]),
        int(r["reasoning"]),
    )
    requests, hits = int(r["requests"]), int(r["cache_hits"])
    group = LedgerGroup(
        day=r["day"],
        app=r["app"],
        team=r["team"],
        key_id=None if r["key_id"] is None else str(r["key_id"]),
        alias=r["alias"],
        model=r["model"],
        provider=r["provider"],
        version=version,
        cache_hit=False,
        requests=requests,
        tokens=tokens,
        list_cost_usd=Decimal(r["list_cost_usd"]),
        actual_cost=Decimal(r["actual_cost"]),
        actual_cost_usd=Decimal(r["actual_cost_usd"]),
        tags=tags,
        batch=bool(r["batch"]),
        web_search_calls=int(r.get("web_search_calls") or 0),
        tool_fee_cost=Decimal(r.get("tool_fee_cost") or 0),
    )
    if hits == 0:
        yield group
        return
    # hits' tokens by request share (whole tokens); hits cost 0, their list cost by share
    share = Decimal(hits) / Decimal(requests)
    counts = tokens.by_class()
    hit_counts = {c: int(n * share) for c, n in counts.items()}
    hit_list = quantize_money(group.list_cost_usd * share)
    yield dataclasses.replace(
        group,
        cache_hit=True,
        requests=hits,
        tokens=Tokens(**hit_counts),
        list_cost_usd=hit_list,
        actual_cost=Decimal(0),
        actual_cost_usd=Decimal(0),
        web_search_calls=0,  # a hit calls nothing
        tool_fee_cost=Decimal(0),
    )
    if requests > hits:
        yield dataclasses.replace(
            group,
            requests=requests - hits,
            tokens=Tokens(**{c: n - hit_counts[c] for c, n in counts.items()}),
            list_cost_usd=group.list_cost_usd - hit_list,
        )


def ledger_totals(
    engine_or_url: Engine | str | None, start: dt.date, end: dt.date
) -> dict[str, Decimal]:
    """The ledger's own sums over priced rows of the period, straight from usage_records
    (what the export's totals are checked against)."""
    sql = text(
        "SELECT COALESCE(SUM(list_cost_usd), 0) AS list_cost_usd, "
        "COALESCE(SUM(actual_cost_usd), 0) AS actual_cost_usd, COUNT(*) AS requests "
        "FROM usage_records WHERE started_at >= :lo AND started_at < :hi "
        "AND price_version_id IS NOT NULL AND list_cost_usd IS NOT NULL "
        "AND actual_cost IS NOT NULL"
    )
    with engine_scope(engine_or_url) as engine, engine.connect() as conn:
        row = conn.execute(sql, _bounds(start, end)).mappings().one()
    return {k: Decimal(row[k]) for k in row}


def ledger_by_day_model(
    engine_or_url: Engine | str | None, provider: str, start: dt.date, end: dt.date
) -> tuple[dict[tuple[dt.date, str], Decimal], str | None]:
    """What the ledger says `provider` billed per (day, model), in its billing currency,
    and that currency (None: no priced rows)."""
    sql = text(
        f"SELECT (bucket AT TIME ZONE 'UTC')::date AS day, model, billing_currency, "
        f"SUM(actual_cost) AS amount FROM {DAILY} "
        "WHERE bucket >= :lo AND bucket < :hi AND provider = :provider "
        "AND actual_cost IS NOT NULL GROUP BY 1, 2, 3 ORDER BY 1, 2"
    )
    out: dict[tuple[dt.date, str], Decimal] = {}
    currency: str | None = None
    with engine_scope(engine_or_url) as engine, engine.connect() as conn:
        for r in conn.execute(sql, {**_bounds(start, end), "provider": provider}).mappings():
            currency = r["billing_currency"]
            key = (r["day"], r["model"])
            out[key] = out.get(key, Decimal(0)) + Decimal(r["amount"])
    return out, currency


def latest_version_lookup(versions: Mapping[uuid.UUID, PriceVersion]) -> VersionLookup:
    """(model, day) -> the latest stored version of that model effective on or before the
    day (the what-if's price for a model a row did not use)."""
    by_model: dict[str, list[PriceVersion]] = {}
    for v in versions.values():
        by_model.setdefault(v.model, []).append(v)
    for vs in by_model.values():
        vs.sort(key=lambda v: v.effective_from)

    def lookup(model: str, day: dt.date) -> PriceVersion | None:
        found = [v for v in by_model.get(model, []) if v.effective_from <= day]
        return found[-1] if found else None

    return lookup


def whatif_rows(
    engine_or_url: Engine | str | None,
    start: dt.date,
    end: dt.date,
    scenario: Scenario,
    team: str | None = None,
) -> list[WhatIfRow]:
    """The period's priced groups re-priced under `scenario` (`gateway.finance.whatif`);
    `team`: that team's groups only (a team-scoped dashboard user)."""
    with engine_scope(engine_or_url) as engine:
        groups = [g for g in ledger_groups(engine, start, end) if team is None or g.team == team]
        lookup = latest_version_lookup(load_versions(engine))
    return reprice(groups, scenario, lookup)
