"""`costgate report` (the usage and costs API's figures as a table, CSV or JSON) and
`costgate rollups rebuild|prune|close|status` (docs/USAGE_API.md, docs/ROLLUPS.md).

A package rather than one module: `gateway/cli` holds its 15-module maximum. Both
commands read the ledger directly (DATABASE_URL, or the embedded PostgreSQL), with the
same query and page code the gateway's API runs, so their figures are the API's.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar

from gateway.cli.config_option import add_config_option, load_for_command


def register(sub: Any) -> None:
    rep = sub.add_parser(
        "report", help="usage or costs by bucket and group, as the usage API answers them"
    )
    rep.add_argument("kind", choices=("completions", "embeddings", "costs"))
    rep.add_argument("--start", required=True, type=_instant, help="YYYY-MM-DD or Unix seconds")
    rep.add_argument("--end", type=_instant, default=None, help="exclusive (default: now)")
    rep.add_argument("--bucket-width", choices=("1m", "1h", "1d"), default="1d")
    rep.add_argument(
        "--group-by",
        "--by",
        default="",
        metavar="G1,G2",
        help="project_id (app), api_key_id, model, team, provider, alias, user (the end user),"
        " tag:KEY; costs: line_item",
    )
    for name in ("project-ids", "api-key-ids", "models", "teams", "providers", "aliases", "users"):
        rep.add_argument(f"--{name}", default="", metavar="A,B", help=f"only these {name}")
    rep.add_argument(
        "--tags", action="append", default=[], metavar="KEY:VALUE", help="only rows with this tag"
    )
    rep.add_argument(
        "--results-limit", type=int, default=None, metavar="N",
        help="with --by user or tag:KEY: the N costliest per bucket",
    )  # fmt: skip
    rep.add_argument("--format", choices=("table", "csv", "json"), default="table")
    rep.set_defaults(func=cmd_report)

    roll = sub.add_parser("rollups", help="the ledger's rollups: rebuild, prune raw rows, status")
    rsub = roll.add_subparsers(dest="rollups_command", required=True, metavar="ACTION")
    rebuild = rsub.add_parser("rebuild", help="recompute rollups of whole UTC days from raw rows")
    rebuild.add_argument("--since", type=_day, default=None, help="YYYY-MM-DD (default: all)")
    rebuild.add_argument("--until", type=_day, default=None, help="YYYY-MM-DD, exclusive")
    rebuild.set_defaults(func=cmd_rebuild)
    prune = rsub.add_parser(
        "prune", help="delete raw rows older than ledger.retention_days (rollups kept)"
    )
    add_config_option(prune)
    prune.add_argument(
        "--days", type=int, default=None, help="retention in days (default: the config's)"
    )
    prune.set_defaults(func=cmd_prune)
    close = rsub.add_parser(
        "close", help="the end users by kind of the UTC days that ended (the writer: hourly)"
    )
    close.set_defaults(func=cmd_close)
    stat = rsub.add_parser("status", help="raw rows and rollup rows, retention horizon")
    stat.set_defaults(func=cmd_status)

    from gateway.devtools.usage_api_bench import add_arguments

    bench = sub.add_parser(
        "usage-api-bench", help="seed a large ledger and time the usage API over HTTP (bounded)"
    )
    add_arguments(bench)
    bench.set_defaults(func=cmd_usage_api_bench)


def _day(value: str) -> dt.date:
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date (YYYY-MM-DD): {value!r}") from None


def _instant(value: str) -> int:
    if value.isdigit():
        return int(value)
    day = _day(value)
    return int(dt.datetime.combine(day, dt.time(), dt.UTC).timestamp())


T = TypeVar("T")


def _on_ledger(use: Callable[[Any], T]) -> T:
    """`use(engine)` on an engine of the ledger, disposed after."""
    engine = _engine()
    try:
        return use(engine)
    finally:
        engine.dispose()


def _engine(read_only: bool = False) -> Any:
    # a report only reads: a streaming replica if DATABASE_READ_URL is set; rebuild, prune
    # and status (which compares raw rows with rollups the primary just wrote) use the primary
    from db.engine import database_url, make_engine, read_database_url

    return make_engine(read_database_url() if read_only else database_url())


def query_items(args: argparse.Namespace) -> list[tuple[str, str]]:
    """The API's query parameters for these arguments (one parser for both)."""
    items = [("start_time", str(args.start)), ("bucket_width", args.bucket_width)]
    if args.end is not None:
        items.append(("end_time", str(args.end)))
    if args.group_by:
        items.append(("group_by", args.group_by))
    for name in ("project_ids", "api_key_ids", "models", "teams", "providers", "aliases", "users"):
        if getattr(args, name, ""):
            items.append((name, getattr(args, name)))
    items += [("tags", t) for t in getattr(args, "tags", [])]
    if getattr(args, "results_limit", None) is not None:
        items.append(("results_limit", str(args.results_limit)))
    return items


def cmd_report(args: argparse.Namespace) -> int:
    from db.analytics.usage_queries import fetch_usage
    from db.analytics.usage_request import (
        LIMITS,
        UsageParamError,
        build_page,
        parse_query,
        rollup_answers,
    )
    from gateway.cli.report import render

    # one bucket a page passes every check; then as many as a page may hold: by user or
    # tag over raw rows (no rollup holds the groups) that is one day's worth
    items = [*query_items(args), ("limit", "1")]
    try:
        query: Any = parse_query(args.kind, items, int(time.time()))
    except UsageParamError as err:
        print(f"costgate report: {err.message}", file=sys.stderr)
        return 2
    most = LIMITS[args.bucket_width][1]
    if query.attributed and not rollup_answers(query):
        most = max(1, 86400 // query.width_s)
    query = dataclasses.replace(query, limit=most)
    group_by = query.group_by
    engine = _engine(read_only=True)
    buckets: list[dict[str, Any]] = []
    try:
        while query is not None:  # every page of the range
            buckets += build_page(query, fetch_usage(engine, query))["data"]
            query = query.following()
    finally:
        engine.dispose()
    if args.format == "json":
        print(render.as_json(buckets))
        return 0
    rows = render.flatten(args.kind, group_by, buckets)
    print(render.as_csv(rows) if args.format == "csv" else render.as_table(rows), end="")
    if args.format == "table":
        print()
    return 0


def cmd_rebuild(args: argparse.Namespace) -> int:
    from db.analytics.rollups import rebuild, rebuild_all, utc_midnight

    if args.since is None and args.until is None:
        folded = _on_ledger(rebuild_all)
    else:
        start = utc_midnight(args.since or dt.date(1970, 1, 1))
        end = utc_midnight(args.until or dt.datetime.now(dt.UTC).date() + dt.timedelta(1))
        folded = _on_ledger(lambda engine: rebuild(engine, start, end))
    print(f"rollups rebuilt from {folded} raw rows")
    return 0


def cmd_prune(args: argparse.Namespace) -> int:
    from db.analytics.rollups import prune, retention_cutoff

    days = args.days
    if days is None:
        days = load_for_command(args.config)[0].ledger.retention_days
    if days is None:
        print("ledger.retention_days is not set: every raw row is kept")
        return 0
    if days < 1:
        print("costgate rollups prune: --days must be at least 1", file=sys.stderr)
        return 2
    cutoff = retention_cutoff(dt.datetime.now(dt.UTC).date(), days)
    deleted = _on_ledger(lambda engine: prune(engine, cutoff))
    print(f"pruned {deleted} raw rows started before {cutoff:%Y-%m-%d} (rollups kept)")
    return 0


def cmd_close(args: argparse.Namespace) -> int:
    from db.analytics.rollups import close_days

    written = _on_ledger(close_days)
    print(f"end users by kind: {written} rows written for the days that ended")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from db.analytics.rollups import status

    s = _on_ledger(status)
    span = f"{s.first_raw:%Y-%m-%d %H:%M} to {s.last_raw:%Y-%m-%d %H:%M}" if s.first_raw else "-"
    print(f"raw rows: {s.raw_rows} ({span})")
    print(f"rollup rows: {s.hourly_rows} hourly, {s.daily_rows} daily; requests {s.daily_requests}")
    horizon = f"{s.pruned_before:%Y-%m-%d}" if s.pruned_before else "never pruned"
    print(f"raw rows pruned before: {horizon}")
    closed = f"{s.kinds_closed_before:%Y-%m-%d}" if s.kinds_closed_before else "none"
    print(f"end users by kind closed before: {closed} (later days: from the per-app rollup)")
    return 0


def cmd_usage_api_bench(args: argparse.Namespace) -> int:
    from gateway.devtools.usage_api_bench import bench

    return bench(args)
