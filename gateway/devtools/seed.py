"""Realistic synthetic history for the ledger (`costgate seed --rows N`).

Several apps and teams, each with its own keys, traffic shape (prompt and completion
sizes, streaming share, which aliases and models it calls), a daily and weekly rhythm,
growth over the period, a few failures, and one routing change half-way (with its audit
row). Models, providers and weights come from the config, and every row is priced with
`gateway.domain.pricing`, the same code the gateway uses, so every figure is consistent.
Rows go in with COPY, in time order; past a million, the database copies a drawn sample.

Seeded rows are marked: their request ids are UUIDs of version 8 (RFC 9562's "custom"
version), which the gateway never issues (its ids are random version 4 UUIDs), so
`remove_seeded` (`costgate seed --remove`) deletes exactly them, and the dashboard can
say that a period holds seeded history. A few of the apps' answers come from the
response cache (billed 0, as the gateway records a hit), so every savings step shows.
Rows carry end users, sessions and tags (`gateway.devtools.seed_attribution`).
"""

from __future__ import annotations

import bisect
import dataclasses
import datetime as dt
import math
import uuid
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import numpy as np
import psycopg

from gateway.devtools import seed_attribution, seed_copies
from gateway.devtools.seed_attribution import DEFAULT_END_USERS, SeedAttribution, draw_attribution
from gateway.domain.config import Config
from gateway.domain.pricing import PriceCatalog, TokenUsage
from gateway.domain.usage_record import UsageRecord

# COPY's column list: UsageRecord's fields, which the ledger's columns are named after
COLUMNS = tuple(f.name for f in dataclasses.fields(UsageRecord))
ZERO = Decimal(0)
SEED_ACTOR = "seed"
# the version nibble of a seeded request id (the 13th hex digit, 15th character of its text)
SEEDED_VERSION = 8
SEEDED_SQL = "substr(request_id::text, 15, 1) = '8'"
# share of an app's successful answers served by the response cache
CACHE_HIT_SHARE = 0.04


@dataclasses.dataclass(frozen=True)
class AppProfile:
    name: str
    team: str
    calls: dict[str, float]  # alias or model -> share of the app's requests
    share: float  # of all traffic
    prompt_median: int
    completion_median: int
    stream_share: float
    cached_share: float  # fraction of prompt tokens served from the provider's cache


APPS = (
    AppProfile("support-bot", "customer", {"auto": 0.7, "fast": 0.3}, 0.32, 900, 220, 0.8, 0.35),
    AppProfile("search", "platform", {"fast": 0.6, "budget": 0.4}, 0.24, 1500, 90, 0.2, 0.5),
    AppProfile(
        "code-assistant", "engineering", {"code": 0.75, "gpt-4.1": 0.25}, 0.16, 3500, 600, 0.9, 0.6
    ),
    AppProfile(
        "analytics", "data", {"balanced": 0.7, "gemini-2.5-pro": 0.3}, 0.12, 6000, 400, 0.1, 0.2
    ),
    AppProfile(
        "marketing-copy", "growth", {"auto": 0.5, "claude-sonnet-4.5": 0.5}, 0.1, 500, 700, 0.5, 0.1
    ),
    AppProfile(
        "internal-tools", "platform", {"budget": 0.6, "gpt-4o-mini": 0.4}, 0.06, 700, 150, 0.3, 0.0
    ),
)
KEYS_PER_APP = 2
# the one routing change in the seeded history: `auto` before it (after it: the config's)
AUTO_BEFORE = {
    "deepseek-v3.2": Decimal(30),
    "gemini-2.5-flash": Decimal(30),
    "claude-sonnet-4.5": Decimal(40),
}
UPSTREAM_FAILURES = (("rate_limited", 429), ("upstream_5xx", 502), ("timeout", 504), ("reset", 502))


@dataclasses.dataclass(frozen=True)
class SeedReport:
    rows: int
    start: dt.datetime
    end: dt.datetime
    apps: int
    keys: int
    end_users: int = 0  # distinct end users written
    tag_values: int = 0  # distinct (tag key, value) pairs written


def _timestamps(rng: np.random.Generator, n: int, days: int, end: dt.datetime) -> np.ndarray:
    """Epoch seconds, sorted: more traffic on weekdays and afternoons (UTC), growing."""
    start = end - dt.timedelta(days=days)
    day_starts = np.array([(start + dt.timedelta(days=i)).timestamp() for i in range(days)])
    weekday = np.array([(start + dt.timedelta(days=i)).weekday() for i in range(days)])
    weights = np.linspace(0.7, 1.3, days) * np.where(weekday >= 5, 0.45, 1.0)
    day = rng.choice(days, size=n, p=weights / weights.sum())
    hour_w = 0.35 + np.exp(-(((np.arange(24) - 15) / 4.0) ** 2))
    hour = rng.choice(24, size=n, p=hour_w / hour_w.sum())
    ts = day_starts[day] + hour * 3600 + rng.uniform(0, 3600, size=n)
    ts = np.minimum(ts, end.timestamp() - 1)
    ts.sort()
    return ts


def _weights_at(cfg: Config, alias: str, auto_switch: float, t: float) -> dict[str, Decimal]:
    if alias == "auto" and t < auto_switch:
        return AUTO_BEFORE
    return dict(cfg.aliases[alias].candidates)


def synthesize(
    cfg: Config,
    rows: int,
    days: int,
    end: dt.datetime,
    keys: dict[str, list[uuid.UUID]],
    seed: int = 7,
    end_users: int = DEFAULT_END_USERS,
    attributed: Callable[[SeedAttribution], None] | None = None,
) -> Iterator[tuple[Any, ...]]:
    """Rows in COPY column order, oldest first; `attributed` gets the rows' end users,
    sessions and tags as drawn (with their distinct counts) before the first row."""
    rng = np.random.default_rng(seed)
    catalog = PriceCatalog.from_config(cfg)
    sim_models = cfg.sim.get("models", {})
    sim_default = cfg.sim.get("default", {})
    auto_switch = (end - dt.timedelta(days=days / 2)).timestamp()

    # drawn in bulk with numpy, then walked as plain Python lists (numpy scalars are slow)
    ts = _timestamps(rng, rows, days, end).tolist()
    app_idx = rng.choice(len(APPS), size=rows, p=[a.share for a in APPS]).tolist()
    u = rng.random((rows, 6)).tolist()
    normal = rng.standard_normal((rows, 3)).tolist()
    call_cdf = {a.name: (list(a.calls), np.cumsum(list(a.calls.values())).tolist()) for a in APPS}
    uuids = rng.bytes(16 * rows)
    candidates = {name: list(a.candidates) for name, a in cfg.aliases.items()}
    cum_weights: dict[tuple[str, bool], tuple[list[str], list[float]]] = {}
    # a generator of its own: the other columns stay as they were drawn before
    attribution = draw_attribution(
        np.random.default_rng([seed, 1]), np.asarray(app_idx), [a.name for a in APPS],
        [a.share for a in APPS], end_users,
    )  # fmt: skip
    if attributed:
        attributed(attribution)
    end_user, session, tags = attribution.end_users, attribution.sessions, attribution.tags

    for i in range(rows):
        app = APPS[app_idx[i]]
        ui, ni = u[i], normal[i]
        calls, cdf = call_cdf[app.name]
        requested = calls[min(bisect.bisect_left(cdf, ui[0]), len(calls) - 1)]
        requested = requested if requested in cfg.aliases or cfg.model(requested) else calls[0]
        alias = requested if requested in cfg.aliases else None
        if alias:
            before = alias == "auto" and ts[i] < auto_switch
            cached = cum_weights.get((alias, before))
            if cached is None:
                w = _weights_at(cfg, alias, auto_switch, ts[i])
                names = [m for m in candidates[alias] if w.get(m, 0) > 0]
                cw = np.cumsum([float(w[m]) for m in names])
                cached = cum_weights[(alias, before)] = (names, (cw / cw[-1]).tolist())
            names, cdf_w = cached
            model_name = names[min(bisect.bisect_left(cdf_w, ui[1]), len(names) - 1)]
        else:
            model_name = requested
        model = cfg.model(model_name)
        assert model is not None
        baseline = cfg.aliases[alias].baseline if alias else None

        stream = bool(ui[2] < app.stream_share)
        prompt = max(8, int(app.prompt_median * math.exp(0.6 * ni[0])))
        completion = max(1, int(app.completion_median * math.exp(0.5 * ni[1])))
        cached_tokens = int(prompt * app.cached_share * ui[3]) if app.cached_share else 0

        r = ui[4]
        status, http, error_class, source = "ok", 200, None, "provider"
        attempts, path = 1, [model_name]
        if r < 0.008:
            status, http, error_class = "client_error", 400, "invalid_request_error"
            attempts, path = 0, []
        elif r < 0.020:
            error_class, http = UPSTREAM_FAILURES[int(ui[5] * len(UPSTREAM_FAILURES))]
            status, attempts, path = "upstream_error", 3, [model_name] * 3
        elif r < 0.025 and stream:
            status, error_class, source = "cancelled", "client_disconnected", "estimated"
            completion = max(1, int(completion * ui[5]))
        elif r < 0.040:
            source = "estimated"
        elif r < 0.043:
            source = "missing"
        elif r < 0.060 and model.fallbacks:
            attempts, path = 2, [model.fallbacks[0], model_name]
        # the response cache answers without an upstream call (gateway/replica/cache)
        hit = status == "ok" and source == "provider" and r > 1 - CACHE_HIT_SHARE
        if hit:
            attempts, path = 0, []

        sim = sim_default | sim_models.get(model.upstream_model, {})
        ttft = float(sim.get("ttft_ms", 120)) * (1 + 0.2 * ni[2])
        gen = completion * float(sim.get("per_token_ms", 4))
        overhead = 3 + 4 * ui[5]
        upstream_ms = int(max(5.0, ttft) + gen) if status != "client_error" else None
        if status == "upstream_error":
            upstream_ms = int(30_000 if error_class == "timeout" else 40 + 200 * ui[3])
        latency = int((upstream_ms or 0) + overhead + max(0, attempts - 1) * 250)
        if hit:
            upstream_ms, latency = None, int(overhead)
        started = dt.datetime.fromtimestamp(ts[i], dt.UTC)

        has_usage = status in ("ok", "cancelled") and source != "missing"
        priced = None
        if has_usage:
            usage = TokenUsage(
                prompt_tokens=prompt,
                cached_prompt_tokens=cached_tokens,
                completion_tokens=completion,
            )
            priced = catalog.price(model_name, usage, baseline_model=baseline)
        yield (
            seeded_request_id(uuids[16 * i : 16 * i + 16]),
            started,
            started + dt.timedelta(milliseconds=latency),
            app.name,
            app.team,
            keys[app.name][int(ui[3] * len(keys[app.name]))],
            requested,
            alias,
            model_name if status != "client_error" else None,
            model.provider if status != "client_error" else None,
            stream,
            status,
            http,
            error_class,
            prompt if has_usage else None,
            cached_tokens if has_usage else None,
            completion if has_usage else None,
            0 if has_usage else None,
            source if status != "client_error" and status != "upstream_error" else "missing",
            latency,
            int(max(5.0, ttft) + overhead) if stream and status in ("ok", "cancelled") else None,
            upstream_ms,
            attempts,
            path,
            "weighted" if alias else ("fixed" if status != "client_error" else None),
            priced.price_version_id if priced else None,
            priced.billing_currency if priced else None,
            (ZERO if hit else priced.actual_cost) if priced else None,
            (ZERO if hit else priced.actual_cost_usd) if priced else None,
            priced.list_cost_usd if priced else None,
            baseline if priced else None,
            priced.baseline_cost_usd if priced else None,
            # a share of the apps' calls on OpenAI's newer API, as the dashboard shows it
            "responses" if ui[2] > 0.85 else "chat.completions",
            0 if has_usage else None,
            hit,
            None,  # trimmed_tokens
            end_user[i],
            session[i],
            tags[i],
            None,
            None,
            None,
            None,
            None,
            None,  # quality signals; no experiment
            None,
            None,
            None,  # standard tier, no web search calls, no fees
        )


def seeded_request_id(random16: bytes) -> uuid.UUID:
    """A request id marked as seeded: random bits, version 8, RFC 9562 variant."""
    raw = bytearray(random16)
    raw[6] = (raw[6] & 0x0F) | (SEEDED_VERSION << 4)
    raw[8] = (raw[8] & 0x3F) | 0x80
    return uuid.UUID(bytes=bytes(raw))


def remove_seeded(url: str) -> int:
    """Delete every seeded row (and the seeded routing change); the rows removed."""
    from db.engine import libpq_url

    with psycopg.connect(libpq_url(url)) as conn:
        removed = conn.execute(f"DELETE FROM usage_records WHERE {SEEDED_SQL}").rowcount
        conn.execute("DELETE FROM routing_changes WHERE actor = %s", (SEED_ACTOR,))
    return int(removed)


def holds_seeded(url: str) -> bool:
    """Whether seeded history is in the ledger: its routing change, written with every
    seeding and removed with it, answers without scanning the ledger."""
    from db.engine import libpq_url

    with psycopg.connect(libpq_url(url)) as conn:
        row = conn.execute(
            "SELECT EXISTS (SELECT 1 FROM routing_changes WHERE actor = %s)", (SEED_ACTOR,)
        ).fetchone()
    return bool(row and row[0])


def _ensure_keys(url: str) -> dict[str, list[uuid.UUID]]:
    """KEYS_PER_APP keys per seeded app, created and revoked at once: they only label
    history (nobody ever sees them, and none of them can authenticate)."""
    from db.keys import create_key, list_keys, revoke_key

    existing: dict[str, list[uuid.UUID]] = {}
    for listing in list_keys(url):
        existing.setdefault(listing.app, []).append(listing.key_id)
    out = {}
    for app in APPS:
        ids = existing.get(app.name, [])[:KEYS_PER_APP]
        while len(ids) < KEYS_PER_APP:
            _, listing = create_key(url, app.name, app.team)
            revoke_key(url, str(listing.key_id))
            ids.append(listing.key_id)
        out[app.name] = ids
    return out


def seed_ledger(
    url: str,
    cfg: Config,
    rows: int,
    days: int = 75,
    end: dt.datetime | None = None,
    seed: int = 7,
    app_name: str | None = None,
    progress: Any = None,
    end_users: int = DEFAULT_END_USERS,
    sample_rows: int = seed_copies.SAMPLE_ROWS,
) -> SeedReport:
    """Write `rows` synthetic records ending at `end` (now), plus prices, keys, one change.
    Past `sample_rows`, that many are drawn and the database copies them to `rows`
    (`gateway.devtools.seed_copies`)."""
    from db.engine import libpq_url, make_engine
    from db.partitions.maintenance import ensure_partitions
    from db.price_sync import sync_prices
    from db.routing_audit import record_routing_change

    end = end or dt.datetime.now(dt.UTC)
    sync_prices(url, cfg)
    keys = _ensure_keys(url)
    # the weeks of the history first: else the default partition takes every row older
    # than this week (measured: 96% of a 180-day seed), and neither retention's dropped
    # weeks nor a query's partition pruning reach them
    engine = make_engine(url)
    try:
        ensure_partitions(engine, since=end - dt.timedelta(days=days))
    finally:
        engine.dispose()
    drawn: list[SeedAttribution] = []
    with psycopg.connect(libpq_url(url)) as conn:
        target = seed_copies.create_sample_table(conn) if rows > sample_rows else "usage_records"
        drawing = min(rows, sample_rows)
        written = seed_copies.copy_lines(
            conn,
            target,
            COLUMNS,
            synthesize(cfg, drawing, days, end, keys, seed, end_users, drawn.append),
            progress,
        )
        conn.commit()
        reached = 0  # distinct end users, when the database copies the sample
        if rows > sample_rows:
            sizes = seed_attribution.populations(end_users, [a.share for a in APPS])
            written, reached = seed_copies.write_copies(conn, COLUMNS, rows, end, progress, sizes)
    switch = end - dt.timedelta(days=days / 2)
    change_id = record_routing_change(
        url,
        SEED_ACTOR,
        app_name or cfg.gateway.app_name,
        "auto",
        # as the update path audits an alias: model -> exact decimal string
        {m: str(w) for m, w in AUTO_BEFORE.items()},
        {m: str(w) for m, w in cfg.aliases["auto"].candidates.items()},
        note="seeded history: more traffic to deepseek-v3.2",
    )
    with psycopg.connect(libpq_url(url)) as conn:
        conn.execute(
            "UPDATE routing_changes SET changed_at = %s WHERE id = %s", (switch, change_id)
        )
        conn.execute("ANALYZE usage_records")
    return SeedReport(
        rows=written,
        start=end - dt.timedelta(days=days),
        end=end,
        apps=len(APPS),
        keys=sum(len(v) for v in keys.values()),
        end_users=reached or (drawn[0].distinct_end_users if drawn else 0),
        tag_values=drawn[0].distinct_tag_values if drawn else 0,
    )
