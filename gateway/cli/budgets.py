"""`costgate budgets set|list|status|remove|history`: spending limits per app, team, key,
tag, each end user of an app, or the whole gateway (docs/BUDGETS.md). Every change is
audited with the OS user as its actor.

Works on DATABASE_URL, or on the embedded PostgreSQL under the state directory.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from gateway.domain.budgets import DEFAULT_ALERT_AT, BudgetPeriod, BudgetScope, parse_alert_at

if TYPE_CHECKING:
    from db.leases import BudgetStatus


def register(sub: Any) -> None:
    budgets = sub.add_parser("budgets", help="budgets: set, list, remove, history")
    bsub = budgets.add_subparsers(dest="budgets_command", required=True, metavar="ACTION")
    setter = bsub.add_parser("set", help="create or change a budget")
    _scope_arguments(setter)
    setter.add_argument("--usd", type=_usd, required=True, metavar="AMOUNT")
    setter.add_argument("--period", choices=[p.value for p in BudgetPeriod], required=True)
    setter.add_argument("--soft", action="store_true", help="alert only, never refuse")
    setter.add_argument(
        "--alert-at",
        type=_alerts,
        default=DEFAULT_ALERT_AT,
        metavar="50,80,100",
        help="alert thresholds in percent of the limit (default: 50,80,100)",
    )
    setter.set_defaults(func=cmd_set)
    lister = bsub.add_parser("list", help="every budget: limit, spent, reserved, remaining")
    lister.set_defaults(func=cmd_list)
    status = bsub.add_parser(
        "status", help="one scope's budgets now; an each-user one: who reached it, top spenders"
    )
    _scope_arguments(status)
    status.add_argument("--top", type=int, default=5, help="top spenders shown (each-user)")
    status.set_defaults(func=cmd_status)
    remover = bsub.add_parser("remove", help="remove a budget (every period unless --period)")
    _scope_arguments(remover)
    remover.add_argument("--period", choices=[p.value for p in BudgetPeriod], default=None)
    remover.set_defaults(func=cmd_remove)
    history = bsub.add_parser("history", help="the audit trail of budget changes")
    history.add_argument("--limit", type=int, default=50)
    history.set_defaults(func=cmd_history)


def _scope_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--app", metavar="NAME")
    group.add_argument("--team", metavar="NAME")
    group.add_argument("--key", metavar="KEY_ID", help="a key id, or its first 8+ characters")
    group.add_argument("--all", action="store_true", help="the whole gateway")
    group.add_argument("--tag", metavar="KEY=VALUE", help="requests carrying this tag")
    parser.add_argument(
        "--each-user",
        action="store_true",
        help="with --app: the limit applies to every end user of the app separately",
    )


def _usd(value: str) -> Decimal:
    try:
        amount = Decimal(value)
    except InvalidOperation:
        raise argparse.ArgumentTypeError(f"not an amount: {value!r}") from None
    if not amount.is_finite() or amount < 0:
        raise argparse.ArgumentTypeError(f"a budget is a non-negative amount: {value!r}")
    return amount


def _alerts(value: str) -> tuple[int, ...]:
    try:
        return parse_alert_at(value)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _database() -> str:
    from db.engine import database_url

    return database_url()


def _scope(args: argparse.Namespace, url: str) -> tuple[BudgetScope, str]:
    if args.each_user and args.app is None:
        raise ValueError("--each-user goes with --app NAME")
    if args.all:
        return BudgetScope.ALL, ""
    if args.app is not None:
        return (BudgetScope.EACH_USER if args.each_user else BudgetScope.APP), args.app
    if args.tag is not None:
        return BudgetScope.TAG, args.tag
    if args.team is not None:
        return BudgetScope.TEAM, args.team
    from db.keys import list_keys

    wanted = args.key.strip().lower()
    if len(wanted) < 8:
        raise ValueError("give at least the first 8 characters of the key id")
    matches = [k for k in list_keys(url) if str(k.key_id).startswith(wanted)]
    if len(matches) != 1:
        raise ValueError(f"no key with id {args.key!r}" if not matches else "several keys match")
    return BudgetScope.KEY, str(matches[0].key_id)


def _actor() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no user name in this environment
        return "unknown"


def cmd_set(args: argparse.Namespace) -> int:
    from db.budgets import set_budget

    url = _database()
    try:
        scope, value = _scope(args, url)
        b = set_budget(
            url,
            scope,
            value,
            BudgetPeriod(args.period),
            args.usd,
            actor=_actor(),
            hard=not args.soft,
            alert_at=args.alert_at,
        )
    except ValueError as err:
        print(f"costgate budgets set: {err}", file=sys.stderr)
        return 2
    kind = "hard" if b.hard else "soft"
    print(f"budget {b.id}: {b.describe()} ({kind}; alerts at {_percent(b.alert_at)})")
    return 0


def _percent(alerts: tuple[int, ...]) -> str:
    return ",".join(f"{a}%" for a in alerts) or "-"


def cmd_list(args: argparse.Namespace) -> int:
    from db.engine import make_engine
    from db.leases import budget_statuses

    engine = make_engine(_database())
    try:
        statuses = budget_statuses(engine)
    finally:
        engine.dispose()
    # an each-user budget's figures are its top spender's; AT LIMIT: end users at or over
    # it, of those who spent this period
    rows: list[tuple[str, ...]] = [
        ("ID", "SCOPE", "PERIOD", "KIND", "LIMIT", "SPENT", "RESERVED", "REMAINING", "ENDS")
        + ("AT LIMIT",)
    ]
    for s in statuses:
        rows.append(_row(s))
    _print(rows)
    return 0


def _row(s: BudgetStatus) -> tuple[str, ...]:
    b, users = s.budget, s.end_users
    return (
        str(b.id),
        b.scope.value + (f":{b.scope_value}" if b.scope_value else ""),
        b.period.value,
        "hard" if b.hard else "soft",
        _money(b.limit_usd),
        _money(s.spent_usd),
        _money(s.reserved_usd),
        _money(s.remaining_usd),
        s.period_end.strftime("%Y-%m-%d %H:%M UTC"),
        "-" if users is None else f"{users.at_or_over}/{users.end_users} end users",
    )


def _print(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())


def cmd_status(args: argparse.Namespace) -> int:
    """The scope's budgets as `list` shows them; an each-user one adds how many end users
    reached it and its top spenders (end users as stored: an HMAC when ids are hashed)."""
    from db.budgets import scope_value_of
    from db.engine import make_engine
    from db.leases import budget_statuses

    url = _database()
    try:
        scope, value = _scope(args, url)
    except ValueError as err:
        print(f"costgate budgets status: {err}", file=sys.stderr)
        return 2
    value = scope_value_of(scope, value)
    engine = make_engine(url)
    try:
        found = [
            s
            for s in budget_statuses(engine, top=max(1, args.top))
            if s.budget.scope is scope and s.budget.scope_value == value
        ]
    finally:
        engine.dispose()
    if not found:
        print(f"costgate budgets status: no budget on {scope.value} {value!r}", file=sys.stderr)
        return 1
    for s in found:
        b = s.budget
        print(f"budget {b.id}: {b.describe()} ({'hard' if b.hard else 'soft'})")
        print(f"  period  {s.period_start:%Y-%m-%d %H:%M} - {s.period_end:%Y-%m-%d %H:%M} UTC")
        users = s.end_users
        if users is None:
            print(f"  spent {_money(s.spent_usd)}, reserved {_money(s.reserved_usd)}, "
                  f"remaining {_money(s.remaining_usd)}")  # fmt: skip
            continue
        print(f"  end users who spent: {users.end_users}; at or over the limit: {users.at_or_over}")
        for end_user, spent in users.top[: max(0, args.top)]:
            print(f"  {_money(spent):>14}  {end_user}")
    return 0


def _money(amount: Decimal) -> str:
    return "$" + format(amount.quantize(Decimal("0.000001")).normalize(), "f")


def cmd_remove(args: argparse.Namespace) -> int:
    from db.budgets import BudgetNotFound, remove_budget

    url = _database()
    try:
        scope, value = _scope(args, url)
        period = None if args.period is None else BudgetPeriod(args.period)
        removed = remove_budget(url, scope, value, period, actor=_actor())
    except (ValueError, BudgetNotFound) as err:
        print(f"costgate budgets remove: {err}", file=sys.stderr)
        return 1
    for b in removed:
        print(f"removed budget {b.id}: {b.describe()}")
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    from db.budgets import budget_changes

    for c in budget_changes(_database(), limit=args.limit):
        before = (c.before or {}).get("limit_usd", "-")
        after = (c.after or {}).get("limit_usd", "removed")
        scope = c.scope + (f":{c.scope_value}" if c.scope_value else "")
        print(
            f"{c.changed_at:%Y-%m-%d %H:%M:%S}  {c.actor}  {scope} {c.period}: {before} -> {after}"
        )
    return 0
