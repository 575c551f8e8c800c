"""`costgate users forget ID`: erase an end user from the ledger (docs/ATTRIBUTION.md).

A package rather than one module: `gateway/cli` holds its 15-module maximum. The id is
taken as the application sends it and turned into its stored form by the config (an
HMAC with `ledger.end_user_hash: hmac`), so the operator never handles hashes; neither
the id, its hash nor the hash's secret is printed.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from typing import Any

from gateway.attribution.inputs import MAX_ID_CHARS, AttributionError, check_text
from gateway.cli.config_option import add_config_option, load_for_command


def register(sub: Any) -> None:
    users = sub.add_parser("users", help="end users: forget one (erasure)")
    usub = users.add_subparsers(dest="users_command", required=True, metavar="ACTION")
    forget = usub.add_parser(
        "forget",
        help="replace an end user by a tombstone in every ledger row and rollup (audited)",
    )
    forget.add_argument(
        "end_user", type=_end_user, metavar="ID", help="the end user as the application sends it"
    )
    forget.add_argument(
        "--actor", default=None, help="who erases, for the audit (default: the OS user)"
    )
    add_config_option(forget)
    forget.set_defaults(func=cmd_forget)


def _end_user(value: str) -> str:
    """What the request path would have accepted, or no row can carry it."""
    try:
        return check_text(value, "ID", MAX_ID_CHARS)
    except AttributionError as err:
        raise argparse.ArgumentTypeError(err.message) from None


def _actor() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no user name in this environment
        return "unknown"


def cmd_forget(args: argparse.Namespace) -> int:
    from db.end_users import forget_end_user
    from db.engine import database_url

    cfg, _ = load_for_command(args.config)
    try:
        ids = cfg.ledger.end_user_ids()
    except ValueError as err:  # hashing on, its secret's variable unset: names the variable
        print(f"costgate users forget: {err}", file=sys.stderr)
        return 2
    actor = args.actor if args.actor is not None else _actor()
    if not actor.strip():
        print("costgate users forget: --actor must not be empty", file=sys.stderr)
        return 2
    erasure = forget_end_user(database_url(), ids.stored(args.end_user), actor=actor)
    print(
        f"erasure {erasure.erasure_id}: {erasure.ledger_rows} ledger rows, "
        f"{erasure.rollup_rows} rollup rows and {erasure.lease_rows} budget leases "
        f"now carry {erasure.tombstone}; {erasure.limit_buckets} rate-limit buckets removed"
    )
    if not (erasure.ledger_rows or erasure.rollup_rows or erasure.lease_rows):
        form = "hashed (ledger.end_user_hash: hmac)" if ids.hashing else "as sent (no hashing)"
        print(
            f"costgate users forget: warning: no row named this end user, looked up {form}; "
            "rows written under another ledger.end_user_hash setting carry another form",
            file=sys.stderr,
        )
    return 0
