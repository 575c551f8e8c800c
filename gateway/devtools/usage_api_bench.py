"""How fast the usage and costs API answers over a large ledger (`costgate usage-api-bench`).

    costgate usage-api-bench [--rows 10000000] [--days 90] [--database-url URL] [--keep]

Seeds `--rows` synthetic ledger rows over `--days` days into a scratch database on the
ledger's server (DATABASE_URL, or the embedded one), one INSERT ... SELECT
generate_series per day (the rollup triggers fold each day as it goes in, as they fold
a writer's batches), then serves the gateway's own FastAPI app (`build_app`, the routes
a Serve replica runs) with uvicorn on 127.0.0.1 and times real HTTP requests with an
admin key: 90 days of daily buckets grouped by model (the acceptance figure), the costs
by project and line item, a week of hourly buckets. `--database-url` with `--no-seed`
times an existing ledger instead. A measurement, not a test: it prints JSON.
Bounded by --rows, --repeat and the server's 30 s statement timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import socket
import statistics
import threading
import time
import uuid
from typing import Any

# (app, team) x 2 keys each; (requested, alias, model, provider, list in, list out per
# 1M, billed multiplier of list, currency): the seeds' shape, no price lookup needed
APPS = (
    ("support-bot", "customer"), ("search", "platform"), ("code-assistant", "engineering"),
    ("analytics", "data"), ("marketing-copy", "growth"), ("internal-tools", "platform"),
)
MODELS = (
    ("auto", "auto", "deepseek-v3.2", "deepseek", "0.28", "0.42", "1", "USD"),
    ("auto", "auto", "gemini-2.5-flash", "google", "0.30", "2.50", "1", "USD"),
    ("fast", "fast", "gpt-4.1-mini", "openai", "0.40", "1.60", "1", "USD"),
    ("code", "code", "relay-gpt-4.1", "relay", "2.00", "8.00", "0.137", "CNY"),
    ("gpt-4.1", None, "gpt-4.1", "openai", "2.00", "8.00", "1", "USD"),
    ("balanced", "balanced", "claude-sonnet-4.5", "anthropic", "3.00", "15.00", "1", "USD"),
    ("gemini-2.5-pro", None, "gemini-2.5-pro", "google", "1.25", "10.00", "1", "USD"),
    ("budget", "budget", "deepseek-v3.2", "relay", "0.28", "0.42", "0.5", "CNY"),
)


def _values(rows: tuple[tuple[Any, ...], ...], cols: str) -> str:
    def lit(v: Any) -> str:
        return "NULL" if v is None else "'" + str(v).replace("'", "''") + "'"

    body = ", ".join(f"({i}, {', '.join(lit(v) for v in r)})" for i, r in enumerate(rows))
    return f"(VALUES {body}) AS {cols}"


def _keys() -> tuple[tuple[str, str, str], ...]:
    rng = uuid.UUID(int=0x5EED)
    return tuple(
        (app, team, str(uuid.uuid5(rng, f"{app}-{k}"))) for app, team in APPS for k in range(2)
    )


_DAY_SQL = f"""
INSERT INTO usage_records (request_id, started_at, ended_at, app, team, key_id,
  requested_model, alias, model, provider, stream, status, http_status, error_class,
  prompt_tokens, cached_prompt_tokens, completion_tokens, reasoning_tokens, usage_source,
  latency_ms, ttft_ms, upstream_latency_ms, attempts, fallback_path, routing_policy,
  billing_currency, actual_cost, actual_cost_usd, list_cost_usd, baseline_model,
  baseline_cost_usd, endpoint, end_user, tags)
SELECT gen_random_uuid(), s.t, s.t + make_interval(secs => s.lat / 1000.0), k.app, k.team,
  k.key_id::uuid, m.req, m.alias, m.model, m.provider, s.g % 3 = 0,
  CASE WHEN s.fail THEN 'upstream_error' ELSE 'ok' END, CASE WHEN s.fail THEN 502 ELSE 200 END,
  CASE WHEN s.fail THEN 'upstream_5xx' END,
  CASE WHEN s.fail THEN NULL ELSE s.p END, CASE WHEN s.fail THEN NULL ELSE s.p / 3 END,
  CASE WHEN s.fail OR s.emb THEN NULL ELSE s.c END, 0,
  CASE WHEN s.fail THEN 'missing' ELSE 'provider' END, s.lat,
  CASE WHEN s.g % 3 = 0 THEN s.lat / 4 END, s.lat - 5, 1, ARRAY[m.model], 'weighted',
  m.cur,
  CASE WHEN NOT s.fail THEN round(s.list * m.mult::numeric * (CASE m.cur WHEN 'CNY'
    THEN 7.3 ELSE 1 END), 10) END,
  CASE WHEN NOT s.fail THEN round(s.list * m.mult::numeric, 10) END,
  CASE WHEN NOT s.fail THEN round(s.list, 10) END, 'gpt-4.1',
  CASE WHEN NOT s.fail THEN round((s.p * 2.00 + s.c * 8.00) * 0.000001, 10) END,
  CASE WHEN s.emb THEN 'embeddings' ELSE 'chat.completions' END,
  CASE WHEN :users > 0 THEN 'user-' || s.u END,
  CASE WHEN :tag_values > 0 THEN jsonb_build_object('feature', 'value-' || s.g % :tag_values) END
FROM (
  SELECT g, t, p, c, lat, fail, emb, mi, u,
         (p * m.pin::numeric + CASE WHEN emb THEN 0 ELSE c END * m.pout::numeric)
           * 0.000001 AS list
  FROM (
    SELECT g, :day + random() * interval '1 day' AS t, 200 + (random() * 3000)::int AS p,
           20 + (random() * 600)::int AS c, 150 + (random() * 2000)::int AS lat,
           random() < 0.02 AS fail, g % 20 = 0 AS emb, g % {len(MODELS)} AS mi,
           floor(random() * greatest(:users, 1))::int AS u
    FROM generate_series(1, :n) AS g
  ) raw JOIN {_values(MODELS, "m(i, req, alias, model, provider, pin, pout, mult, cur)")}
    ON m.i = raw.mi
) s
JOIN {_values(MODELS, "m(i, req, alias, model, provider, pin, pout, mult, cur)")} ON m.i = s.mi
JOIN {_values(_keys(), "k(i, app, team, key_id)")} ON k.i = (s.g * 7 + s.mi) % {len(APPS) * 2}
"""


def seed_sql(
    url: str, rows: int, days: int, end: dt.date, progress: Any = None, users: int = 0,
    tag_values: int = 0,
) -> float:
    """Seed `rows` over the `days` UTC days before `end`, each row's end user one of
    `users` drawn uniformly (the worst case for the user rollup) and its `feature` tag one
    of `tag_values` (0: none); returns seconds taken."""
    from sqlalchemy import text

    from db.engine import make_engine

    engine = make_engine(url)
    t0 = time.perf_counter()
    try:
        per_day, extra = divmod(rows, days)
        for i in range(days):
            day = dt.datetime.combine(end - dt.timedelta(days=days - i), dt.time(), dt.UTC)
            with engine.begin() as conn:
                conn.execute(text(_DAY_SQL), {"day": day, "n": per_day + (i < extra),
                                              "users": users, "tag_values": tag_values})
            if progress:
                progress(i + 1, days)
    finally:
        engine.dispose()
    return time.perf_counter() - t0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _serve(url: str) -> tuple[str, str, Any, threading.Thread]:
    """The gateway's FastAPI app on uvicorn in a thread; (base URL, admin key, server)."""
    import uvicorn

    from db.keys import create_key, load_active_keys
    from gateway.domain.config import default_config_path, load_config
    from gateway.replica.auth import Caller, KeyRing
    from gateway.replica.http_api import build_app
    from gateway.replica.service import GatewayService
    from gateway.replica.usage_api.route import UsageApi

    key, _ = create_key(url, "usage-api-bench", is_admin=True)
    cfg = load_config(default_config_path())
    port = _free_port()
    holder: dict[str, Any] = {}

    def run() -> None:
        async def main() -> None:
            ring = KeyRing(require_keys=True)
            ring.replace({d: Caller.of_key(k) for d, k in load_active_keys(url).items()})
            service = GatewayService(cfg, keyring=ring)
            app = build_app(service, usage_api=UsageApi(ring, url))
            server = uvicorn.Server(
                uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
            )
            holder["server"] = server
            await server.serve()

        asyncio.run(main())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    for _ in range(200):  # bounded: up to 20 s for the server to listen
        server = holder.get("server")
        if server is not None and server.started:
            break
        time.sleep(0.1)
    return f"http://127.0.0.1:{port}", key, holder.get("server"), thread


def _time(client: Any, path: str, params: dict[str, Any], repeat: int) -> dict[str, Any]:
    times, body = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        r = client.get(path, params=params)
        times.append((time.perf_counter() - t) * 1000)
        if r.status_code != 200:
            return {"status": r.status_code, "error": r.text[:200]}
        body = r.json()
    results = sum(len(b["results"]) for b in body["data"]) if body else 0
    return {
        "first_ms": round(times[0], 1),
        "median_ms": round(statistics.median(times), 1),
        "max_ms": round(max(times), 1),
        "buckets": len(body["data"]) if body else 0,
        "results": results,
    }


def run(url: str, days: int, repeat: int, users: int = 0) -> dict[str, Any]:
    import httpx

    base, key, server, thread = _serve(url)
    now = int(time.time())
    start = now - days * 86400
    try:
        with httpx.Client(
            base_url=base, headers={"authorization": f"Bearer {key}"}, timeout=60
        ) as client:
            out = {
                "completions_1d_by_model": _time(
                    client, "/v1/organization/usage/completions",
                    {"start_time": start, "bucket_width": "1d", "group_by": "model",
                     "limit": days + 1}, repeat,
                ),
                "costs_1d_by_project_and_line_item": _time(
                    client, "/v1/organization/costs",
                    {"start_time": start, "group_by": ["project_id", "line_item"],
                     "limit": days + 1}, repeat,
                ),
                "completions_1h_7d_by_model": _time(
                    client, "/v1/organization/usage/completions",
                    {"start_time": now - 7 * 86400, "bucket_width": "1h", "group_by": "model",
                     "limit": 168}, repeat,
                ),
            }
            if users:  # by end user: 30 days, the costliest 100 a day; one whole day
                month = {"start_time": now - 30 * 86400, "group_by": "user", "limit": 31}
                out["completions_30d_by_user_top100"] = _time(
                    client, "/v1/organization/usage/completions",
                    {**month, "results_limit": 100}, repeat)
                out["costs_30d_by_user_top1000"] = _time(
                    client, "/v1/organization/costs", {**month, "results_limit": 1000}, repeat)
                out["costs_1d_by_user_every_user"] = _time(
                    client, "/v1/organization/costs",
                    {"start_time": now - 2 * 86400, "group_by": "user", "limit": 1}, repeat)
                out["costs_30d_by_tag"] = _time(
                    client, "/v1/organization/costs",
                    {**month, "group_by": "tag:feature"}, repeat)
    finally:
        if server is not None:
            server.should_exit = True
        thread.join(timeout=10)
    return out


def _seed(url: str, args: argparse.Namespace) -> dict[str, Any]:
    """Seed, the rollups folded by the trigger per day or by one rebuild at the end (the
    migration's backfill: much faster for a bulk load on a busy machine)."""
    from sqlalchemy import text

    from db.analytics.rollups import rebuild_all
    from db.engine import make_engine

    engine = make_engine(url)
    out: dict[str, Any] = {"fold": args.fold}
    try:
        if args.fold == "rebuild":
            with engine.begin() as conn:
                conn.execute(text("ALTER TABLE usage_records DISABLE TRIGGER "
                                  "usage_records_rollup_insert"))
        end = dt.datetime.now(dt.UTC).date() + dt.timedelta(days=1)
        out["seed_seconds"] = round(seed_sql(
            url, args.rows, args.days, end,
            progress=lambda i, n: print(f"seeded day {i}/{n}", flush=True),
            users=args.users, tag_values=args.tag_values,
        ), 1)
        if args.fold == "rebuild":
            with engine.begin() as conn:
                conn.execute(text("ALTER TABLE usage_records ENABLE TRIGGER "
                                  "usage_records_rollup_insert"))
            t = time.perf_counter()
            rebuild_all(engine)
            out["rebuild_seconds"] = round(time.perf_counter() - t, 1)
        with engine.begin() as conn:
            conn.execute(text("ANALYZE"))  # the planner's estimates for the new tables
    finally:
        engine.dispose()
    return out


SIZED = (
    "usage_records", "usage_rollup_hourly", "usage_rollup_daily", "latency_rollup_hourly",
    "latency_rollup_daily", "usage_rollup_user_daily", "usage_rollup_tag_daily",
    "usage_rollup_session_daily",
)  # fmt: skip


def table_sizes(url: str) -> dict[str, Any]:
    """Rows and pg_total_relation_size (indexes and TOAST included) of the ledger's tables."""
    from sqlalchemy import text

    from db.engine import make_engine

    engine = make_engine(url)
    out: dict[str, Any] = {}
    try:
        with engine.connect() as conn:
            for t in SIZED:
                n, size = conn.execute(
                    text(f"SELECT count(*), pg_total_relation_size('{t}') FROM {t}")
                ).one()
                out[t] = {"rows": int(n), "bytes": int(size)}
    finally:
        engine.dispose()
    return {"tables": out}


def bench(args: argparse.Namespace) -> int:
    import psycopg
    from sqlalchemy import make_url, text

    from db.engine import database_url, libpq_url, make_engine
    from db.migrate import upgrade

    server = args.database_url or database_url()
    scratch = not args.no_seed
    url = server
    if scratch:
        name = f"costgate_usage_bench_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(libpq_url(server), autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        url = make_url(server).set(database=name).render_as_string(hide_password=False)
    result: dict[str, Any] = {}
    try:
        upgrade(url)
        if scratch:
            result |= _seed(url, args)
        engine = make_engine(url)
        with engine.connect() as conn:
            users = conn.execute(text("SELECT count(DISTINCT end_user) FROM usage_records"))
            result["end_users"] = users.scalar()
        engine.dispose()
        result |= table_sizes(url)
        result |= run(url, args.days, args.repeat, args.users)
    finally:
        if scratch and not args.keep:
            with psycopg.connect(libpq_url(server), autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        elif scratch:
            result["kept_database"] = url
    print(json.dumps(result))
    return 0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rows", type=int, default=10_000_000)
    p.add_argument("--days", type=int, default=90)
    p.add_argument("--repeat", type=int, default=10, help="requests per figure")
    p.add_argument("--database-url", default=None, help="server to use (default: the ledger's)")
    p.add_argument("--no-seed", action="store_true", help="time --database-url's ledger as is")
    p.add_argument("--keep", action="store_true", help="keep the seeded scratch database")
    p.add_argument("--users", type=int, default=100_000, help="end users (0: rows without)")
    p.add_argument("--tag-values", type=int, default=50, help="values of the feature tag")
    p.add_argument(
        "--fold",
        choices=("rebuild", "trigger"),
        default="rebuild",
        help="fold the seeded rows by one rebuild at the end (default) or by the trigger",
    )
