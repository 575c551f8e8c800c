"""`costgate migrate`, `costgate keys create|list|revoke`, `costgate prices sync`,
`costgate ledger-bench`: the ledger's commands (`costgate users` is gateway.cli.users).

Each works on DATABASE_URL, or on the embedded PostgreSQL under the state directory
(started if needed) when it is unset.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from pathlib import Path
from typing import Any

from gateway.cli.config_option import add_config_option, load_for_command


def register(sub: Any) -> None:
    mig = sub.add_parser("migrate", help="apply database migrations, then sync the config's prices")
    add_config_option(mig)
    mig.add_argument("--to", default="head", help="target revision (default: head)")
    mig.add_argument(
        "--downgrade", action="store_true", help="downgrade to --to instead (e.g. --to base)"
    )
    mig.add_argument("--no-price-sync", action="store_true", help="skip the price sync")
    mig.set_defaults(func=cmd_migrate)

    keys = sub.add_parser("keys", help="gateway keys: create, list, revoke")
    ksub = keys.add_subparsers(dest="keys_command", required=True, metavar="ACTION")
    create = ksub.add_parser("create", help="create a key for an app; prints it once")
    create.add_argument("--app", required=True)
    create.add_argument("--team", default=None)
    create.add_argument(
        "--models",
        type=_names,
        default=None,
        metavar="M1,ALIAS2",
        help="the only models and aliases the key may use (default: any)",
    )
    create.add_argument("--max-n", type=_positive, default=None, help="largest `n` (choices)")
    create.add_argument(
        "--max-output-tokens",
        type=_positive,
        default=None,
        help="largest max_tokens / max_completion_tokens a request may ask for",
    )
    create.add_argument(
        "--expires",
        type=_expiry,
        default=None,
        metavar="YYYY-MM-DD",
        help="the key stops working at 00:00 UTC on this day",
    )
    create.add_argument(
        "--admin", action="store_true", help="an admin key: also reaches /costgate/routing"
    )
    create.add_argument(
        "--rpm", type=_positive, default=None, help="requests per minute, across replicas"
    )
    create.add_argument(
        "--tpm",
        type=_positive,
        default=None,
        help="tokens (prompt + output) per minute, across replicas",
    )
    create.add_argument(
        "--tag",
        dest="tags",
        type=_tag,
        action="append",
        default=None,
        metavar="KEY=VALUE",
        help="a tag every request of the key carries (repeatable)",
    )
    create.add_argument(
        "--allow-tag-key",
        dest="allowed_tag_keys",
        action="append",
        default=None,
        metavar="KEY",
        help="a tag key requests may set themselves (repeatable; default: any key; the "
        "key's own --tag tags always apply)",
    )
    create.add_argument(
        "--user-rpm", type=_positive, default=None, help="requests per minute per end user"
    )
    create.add_argument(
        "--user-tpm", type=_positive, default=None, help="tokens per minute per end user"
    )
    add_config_option(create)
    create.set_defaults(func=cmd_keys_create)
    listing = ksub.add_parser("list", help="list keys (never the keys themselves)")
    listing.add_argument("--active", action="store_true", help="hide revoked keys")
    listing.set_defaults(func=cmd_keys_list)
    revoke = ksub.add_parser("revoke", help="revoke a key by id (or its first 8+ characters)")
    revoke.add_argument("key_id")
    revoke.set_defaults(func=cmd_keys_revoke)

    prices = sub.add_parser("prices", help="price versions")
    psub = prices.add_subparsers(dest="prices_command", required=True, metavar="ACTION")
    sync = psub.add_parser("sync", help="write the config's price versions and billing rules")
    add_config_option(sync)
    sync.set_defaults(func=cmd_prices_sync)

    ledger = sub.add_parser("ledger", help="the ledger table's upkeep")
    lsub = ledger.add_subparsers(dest="ledger_command", required=True, metavar="ACTION")
    parts = lsub.add_parser("partitions", help="create the weekly partitions ahead")
    parts.add_argument("--since", type=dt.date.fromisoformat, default=None,
                       help="also the weeks from this date (default: this week)")  # fmt: skip
    parts.add_argument("--ahead-weeks", type=_positive, default=4)
    parts.set_defaults(func=cmd_ledger_partitions)

    from gateway.devtools.ledger_bench import add_arguments

    bench = sub.add_parser("ledger-bench", help="measure the record writer's rows/s (bounded)")
    add_arguments(bench)
    bench.set_defaults(func=cmd_ledger_bench)


def _names(value: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(n.strip() for n in value.split(",") if n.strip()))
    if not names:
        raise argparse.ArgumentTypeError("give at least one model or alias name")
    return names


def _tag(value: str) -> tuple[str, str]:
    key, eq, tag_value = value.partition("=")
    if not eq or not key.strip():
        raise argparse.ArgumentTypeError(f"a tag is KEY=VALUE (got {value!r})")
    return key.strip(), tag_value.strip()


def _positive(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 (got {number})")
    return number


def _expiry(value: str) -> dt.datetime:
    try:
        day = dt.date.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date (YYYY-MM-DD): {value!r}") from None
    at = dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC)
    if at <= dt.datetime.now(dt.UTC):
        raise argparse.ArgumentTypeError(f"{value} is not in the future: the key would be dead")
    return at


def _database() -> str:
    from db.engine import database_url

    return database_url()


def _load_config(path: Path | None) -> Any:
    return load_for_command(path)[0]


def _print_sync(result: Any) -> None:
    print(
        f"prices: {result.versions_inserted} new price versions "
        f"({result.versions_total} in the config), "
        f"{result.providers_changed} providers' billing updated"
    )


def cmd_migrate(args: argparse.Namespace) -> int:
    from db.migrate import current_revision, downgrade, upgrade

    cfg = None if args.downgrade or args.no_price_sync else _load_config(args.config)
    url = _database()
    if args.downgrade:
        downgrade(url, args.to)
    else:
        upgrade(url, args.to)
    print(f"database at revision {current_revision(url) or 'base (empty)'}")
    if cfg is not None:
        from db.price_sync import sync_prices

        _print_sync(sync_prices(url, cfg))
    return 0


def cmd_prices_sync(args: argparse.Namespace) -> int:
    from db.price_sync import sync_prices

    _print_sync(sync_prices(_database(), _load_config(args.config)))
    return 0


def cmd_keys_create(args: argparse.Namespace) -> int:
    from db.keys import create_key

    if args.models is not None:
        _warn_unknown_models(args.models, args.config)
    tags = dict(args.tags or ())
    if len(tags) < len(args.tags or ()):
        print("costgate keys create: a tag key is given twice", file=sys.stderr)
        return 2
    try:
        key, listing = create_key(
            _database(),
            args.app,
            team=args.team,
            allowed_models=args.models,
            max_n=args.max_n,
            max_output_tokens=args.max_output_tokens,
            expires_at=args.expires,
            is_admin=args.admin,
            rpm_limit=args.rpm,
            tpm_limit=args.tpm,
            default_tags=tags or None,
            allowed_tag_keys=args.allowed_tag_keys,
            user_rpm_limit=args.user_rpm,
            user_tpm_limit=args.user_tpm,
        )
    except ValueError as err:  # a tag out of the request path's bounds
        print(f"costgate keys create: {err}", file=sys.stderr)
        return 2
    print(key)
    print(
        f"{'admin key' if listing.is_admin else 'key'} {listing.key_id} for app {listing.app!r}"
        + (f" (team {listing.team!r})" if listing.team else "")
        + f", {_scope(listing)}: shown once, store it now",
        file=sys.stderr,
    )
    return 0


def _warn_unknown_models(names: tuple[str, ...], config: Path | None) -> None:
    """A name the config does not know is most likely a typo, but the model may be about
    to be added, and keys are managed where the config may not be: a warning only."""
    from gateway.domain.config import ConfigError, default_config_path, load_config

    try:
        known = set(load_config(config or default_config_path()).public_names())
    except ConfigError:
        return
    unknown = [m for m in names if m not in known]
    if unknown:
        print(
            f"costgate keys create: warning: not in the config: {', '.join(unknown)}",
            file=sys.stderr,
        )


def _scope(k: Any) -> str:
    """A key's scope in a few words, for its listing."""
    parts = [
        "models " + ",".join(k.allowed_models) if k.allowed_models is not None else "any model"
    ]
    if k.max_n is not None:
        parts.append(f"n<={k.max_n}")
    if k.max_output_tokens is not None:
        parts.append(f"output<={k.max_output_tokens}")
    if k.expires_at is not None:
        parts.append("expires " + k.expires_at.strftime("%Y-%m-%d %H:%M"))
    if k.rpm_limit is not None:
        parts.append(f"rpm {k.rpm_limit}")
    if k.tpm_limit is not None:
        parts.append(f"tpm {k.tpm_limit}")
    if k.default_tags:
        parts.append("tags " + ",".join(f"{t}={v}" for t, v in sorted(k.default_tags.items())))
    if k.allowed_tag_keys is not None:
        parts.append("tag keys " + (",".join(k.allowed_tag_keys) or "none"))
    if k.user_rpm_limit is not None:
        parts.append(f"user rpm {k.user_rpm_limit}")
    if k.user_tpm_limit is not None:
        parts.append(f"user tpm {k.user_tpm_limit}")
    return " ".join(parts)


def cmd_keys_list(args: argparse.Namespace) -> int:
    from db.keys import list_keys

    rows = [("ID", "APP", "TEAM", "PREFIX", "CREATED", "REVOKED", "ADMIN", "SCOPE")]
    for k in list_keys(_database(), include_revoked=not args.active):
        rows.append(
            (
                str(k.key_id),
                k.app,
                k.team or "-",
                k.prefix + "…",
                k.created_at.strftime("%Y-%m-%d %H:%M"),
                k.revoked_at.strftime("%Y-%m-%d %H:%M") if k.revoked_at else "-",
                "yes" if k.is_admin else "-",
                _scope(k),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return 0


def cmd_keys_revoke(args: argparse.Namespace) -> int:
    from db.keys import KeyLookupError, revoke_key

    try:
        k = revoke_key(_database(), args.key_id)
    except KeyLookupError as err:
        print(f"costgate keys revoke: {err}", file=sys.stderr)
        return 1
    print(f"revoked key {k.key_id} of app {k.app!r}")
    return 0


def cmd_ledger_bench(args: argparse.Namespace) -> int:
    from gateway.devtools.ledger_bench import bench

    return bench(args)


def cmd_ledger_partitions(args: argparse.Namespace) -> int:
    from db.engine import make_engine
    from db.partitions.maintenance import ensure_partitions, is_partitioned, partitions

    engine = make_engine(_database())
    try:
        if not is_partitioned(engine):
            print("usage_records is not partitioned: run `costgate migrate` first")
            return 1
        since = dt.datetime.combine(args.since, dt.time(), dt.UTC) if args.since else None
        made = ensure_partitions(engine, since, args.ahead_weeks)
        names = partitions(engine)
    finally:
        engine.dispose()
    print(f"created {made} partitions; {len(names)} in all: {names[0]} .. {names[-1]}")
    return 0
