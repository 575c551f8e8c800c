"""`costgate export focus`, `costgate whatif`, `costgate reconcile`, `costgate fx`:
finance's numbers out of the ledger (docs/FINANCE.md).

They read the daily rollups (docs/ROLLUPS.md) of DATABASE_URL, or of the embedded
PostgreSQL under the state directory.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import hashlib
import json
import sys
from collections.abc import Iterable
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from gateway.cli.config_option import add_config_option, load_for_command


def register(sub: Any) -> None:
    export = sub.add_parser("export", help="export the ledger (FOCUS 1.2)")
    esub = export.add_subparsers(dest="export_command", required=True, metavar="FORMAT")
    focus = esub.add_parser("focus", help="FOCUS 1.2 CSV: one row per token class, day, key")
    _period(focus)
    focus.add_argument("--output", type=Path, required=True, metavar="FILE")
    focus.add_argument(
        "--split-by",
        default=None,
        metavar="user|tag:KEY",
        help="rows also per end user or tag value (Tags carries it); reads raw rows",
    )
    focus.set_defaults(func=cmd_export_focus)

    whatif = sub.add_parser("whatif", help="re-price a period under another mix or prices")
    _period(whatif)
    add_config_option(whatif)
    whatif.add_argument(
        "--routing",
        action="append",
        default=[],
        metavar="ALIAS:MODEL=W,...",
        help="another routing mix for an alias",
    )
    whatif.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="[FROM=]TO",
        help="send a model's tokens (every model's without FROM) to another",
    )
    whatif.add_argument("--multiplier", action="append", default=[], metavar="PROVIDER=X")
    whatif.add_argument(
        "--fx",
        action="append",
        default=[],
        metavar="PROVIDER=RATE",
        help="units of the provider's currency per USD",
    )
    whatif.add_argument(
        "--price",
        action="append",
        default=[],
        metavar="MODEL:input=X,output=Y",
        help="a model's list prices per 1M",
    )
    whatif.add_argument("--by", choices=("app", "model", "day", "all"), default="all")
    whatif.add_argument("--json", action="store_true")
    whatif.set_defaults(func=cmd_whatif)

    rec = sub.add_parser("reconcile", help="compare a provider's invoice with the ledger")
    _period(rec)
    add_config_option(rec)
    rec.add_argument("--provider", required=True, help="the config's provider name")
    rec.add_argument("--file", type=Path, help="import this export first")
    rec.add_argument("--format", choices=("openai", "anthropic", "generic"), default=None)
    rec.add_argument("--map", default=None, metavar="day=COL,model=COL,amount=COL")
    rec.add_argument("--currency", default=None, help="the generic file's currency")
    rec.add_argument(
        "--threshold",
        type=_amount,
        default=Decimal("0.01"),
        help="largest difference allowed per day and model (default 0.01)",
    )
    rec.add_argument(
        "--threshold-pct",
        type=_amount,
        default=Decimal(0),
        help="or this percent of the invoiced amount, when larger",
    )
    rec.set_defaults(func=cmd_reconcile)

    fx = sub.add_parser("fx", help="dated FX rates: add, import, list")
    fsub = fx.add_subparsers(dest="fx_command", required=True, metavar="ACTION")
    add = fsub.add_parser("add", help="a rate in force from a date on")
    add.add_argument("currency")
    add.add_argument("per_usd", type=_amount, help="units of the currency per USD")
    add.add_argument("--from", dest="effective_from", type=_date, required=True)
    add_config_option(add)
    add.set_defaults(func=cmd_fx_add)
    imp = fsub.add_parser("import", help="a CSV of currency,effective_from,per_usd")
    imp.add_argument("file", type=Path)
    add_config_option(imp)
    imp.set_defaults(func=cmd_fx_import)
    fsub.add_parser("list", help="every dated rate").set_defaults(func=cmd_fx_list)


def _period(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--start", type=_date, required=True, metavar="YYYY-MM-DD")
    parser.add_argument(
        "--end", type=_date, required=True, metavar="YYYY-MM-DD", help="the last day included (UTC)"
    )


def _date(value: str) -> dt.date:
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date (YYYY-MM-DD): {value!r}") from None


def _amount(value: str) -> Decimal:
    try:
        amount = Decimal(value)
    except InvalidOperation:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if not amount.is_finite() or amount < 0:
        raise argparse.ArgumentTypeError(f"a non-negative number is needed: {value!r}")
    return amount


def _url() -> str:
    from db.engine import database_url

    return database_url()


def _read_url() -> str:
    """Exports and what-ifs only read: a streaming replica if DATABASE_READ_URL is set."""
    from db.engine import read_database_url

    return read_database_url()


def _fail(message: str) -> int:
    print(f"costgate: {message}", file=sys.stderr)
    return 2


def _bad_period(args: argparse.Namespace) -> bool:
    if args.end < args.start:
        _fail("--end is before --start")
        return True
    return False


# -- export focus -------------------------------------------------------------------------


def cmd_export_focus(args: argparse.Namespace) -> int:
    from db.analytics.finance_ledger import ledger_groups, ledger_totals, split_column
    from gateway.finance.focus_columns import check_row
    from gateway.finance.focus_rows import csv_value, focus_rows, header

    if _bad_period(args):
        return 2
    split = getattr(args, "split_by", None)
    try:
        if split is not None:
            split_column(split)
        groups = list(ledger_groups(_read_url(), args.start, args.end, split))
    except ValueError as err:
        return _fail(str(err))
    url = _read_url()
    totals: dict[str, Decimal] = {}
    list_usd = billed_usd = Decimal(0)
    count = 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    with args.output.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(header())
        for row in focus_rows(groups):
            problems = check_row(row)
            if problems:  # a bug of ours: never hand finance a file that breaks the spec
                return _fail(f"row {count} breaks FOCUS 1.2: {'; '.join(problems)}")
            writer.writerow([csv_value(row[name]) for name in header()])
            currency = str(row["BillingCurrency"])
            totals[currency] = totals.get(currency, Decimal(0)) + Decimal(str(row["ListCost"]))
            list_usd += Decimal(str(row["x_ListCostUsd"]))
            billed_usd += Decimal(str(row["x_BilledCostUsd"]))
            count += 1
    ledger = ledger_totals(url, args.start, args.end)
    print(f"{count} FOCUS 1.2 rows written to {args.output}")
    for currency, amount in sorted(totals.items()):
        print(f"  ListCost {currency}: {amount}")
    print(f"  list cost in USD: {list_usd} (ledger: {ledger['list_cost_usd']})")
    print(f"  billed in USD: {billed_usd} (ledger: {ledger['actual_cost_usd']})")
    return 0


# -- whatif ------------------------------------------------------------------------------


def _pairs(values: Iterable[str], what: str) -> dict[str, Decimal]:
    out = {}
    for text in values:
        name, sep, number = text.partition("=")
        if not sep:
            raise ValueError(f"--{what} wants NAME=NUMBER, got {text!r}")
        try:
            out[name.strip()] = _amount(number)
        except argparse.ArgumentTypeError as err:
            raise ValueError(f"--{what}: {err}") from None
    return out


def build_scenario(args: argparse.Namespace) -> Any:
    """The scenario the options describe; ValueError names what is wrong."""
    from gateway.domain.pricing import PriceCatalog
    from gateway.finance.whatif import PriceSheet, Scenario, parse_prices, parse_routing

    cfg, _ = load_for_command(args.config)
    catalog = PriceCatalog.from_config(cfg)
    routing = dict(parse_routing(t) for t in args.routing)
    prices = {}
    for text in args.price:
        name = text.partition(":")[0].strip()
        if name not in catalog.versions:
            raise ValueError(f"unknown or unpriced model {name!r}")
        model, rates = parse_prices(text, catalog.versions[name].list_rates)
        prices[model] = rates
    swaps: dict[str | None, str] = {}
    for text in args.model:
        src, sep, dst = text.rpartition("=")
        swaps[src.strip() if sep else None] = dst.strip()
    fx = _pairs(args.fx, "fx")
    if any(v == 0 for v in fx.values()):
        raise ValueError("--fx: a rate is above 0")
    return Scenario(
        routing=routing,
        swaps=swaps,
        prices=PriceSheet(_pairs(args.multiplier, "multiplier"), fx, prices),
    )


def cmd_whatif(args: argparse.Namespace) -> int:
    from db.analytics.finance_ledger import whatif_rows
    from gateway.finance.whatif import UnpricedModel, summarize

    if _bad_period(args):
        return 2
    try:
        scenario = build_scenario(args)
        rows = whatif_rows(_read_url(), args.start, args.end, scenario)
    except (ValueError, UnpricedModel) as err:
        return _fail(str(err))
    views = ("app", "model", "day", "total") if args.by == "all" else (args.by, "total")
    report = {by: summarize(rows, by) for by in views}
    if args.json:
        print(
            json.dumps(
                {
                    by: [
                        {
                            by: str(k),
                            "ledger_usd": str(a),
                            "whatif_usd": str(b),
                            "difference_usd": str(b - a),
                        }
                        for k, (a, b) in table.items()
                    ]
                    for by, table in report.items()
                },
                indent=2,
            )
        )
        return 0
    for by, table in report.items():
        print(f"\nby {by}:" if by != "total" else "")
        print(f"  {by:<28} {'ledger USD':>16} {'what-if USD':>16} {'difference':>16}")
        for key, (ledger, whatif) in table.items():
            print(
                f"  {str(key):<28} {_usd(ledger):>16} {_usd(whatif):>16} "
                f"{_usd(whatif - ledger):>16}"
            )
    return 0


def _six(amount: Decimal) -> str:
    """Six places, and no "-0.000000" for a difference that rounds to nothing."""
    rounded = amount.quantize(Decimal("0.000001"))
    return f"{rounded + 0 if rounded.is_zero() else rounded:.6f}"


def _usd(amount: Decimal) -> str:
    return f"{amount.quantize(Decimal('0.000001')):,}"


# -- reconcile ---------------------------------------------------------------------------


def cmd_reconcile(args: argparse.Namespace) -> int:
    from db.analytics.finance_ledger import ledger_by_day_model
    from db.analytics.invoice_store import load_invoice, save_invoice
    from gateway.finance.invoices import InvoiceFormatError, parse_invoice, parse_mapping
    from gateway.finance.reconcile import Threshold, flagged, invoice_totals, reconcile

    if _bad_period(args):
        return 2
    cfg, _ = load_for_command(args.config)
    if args.provider not in {p.name for p in cfg.providers}:
        return _fail(f"unknown provider {args.provider!r}")
    url = _url()
    if args.file is not None:
        if args.format is None:
            return _fail("--file needs --format openai|anthropic|generic")
        models = {m.name: m.upstream_model for m in cfg.models if m.provider == args.provider}
        try:
            text = args.file.read_text(encoding="utf-8-sig")
            mapping = parse_mapping(args.map) if args.map else None
            lines = parse_invoice(args.format, text, models, mapping, args.currency)
        except (OSError, InvoiceFormatError) as err:
            return _fail(f"{args.file}: {err}")
        import_id = hashlib.sha256(text.encode()).hexdigest()[:16]
        saved = save_invoice(url, args.provider, args.format, import_id, lines)
        print(f"imported {saved} invoice lines from {args.file}")
    ledger, currency = ledger_by_day_model(url, args.provider, args.start, args.end)
    currency = currency or cfg.provider(args.provider).billing.currency
    invoice = invoice_totals(load_invoice(url, args.provider, args.start, args.end))
    threshold = Threshold(args.threshold, args.threshold_pct / 100)
    try:
        matches = reconcile(ledger, invoice, currency, threshold)
    except ValueError as err:
        return _fail(str(err))
    print(f"{'day':<12} {'model':<28} {'ledger':>14} {'invoice':>14} {'difference':>14}")
    for m in matches:
        mark = "  <-- over threshold" if m.flagged else ""
        print(
            f"{m.day.isoformat():<12} {m.model:<28} {m.ledger:>14.6f} {m.invoiced:>14.6f} "
            f"{_six(m.difference):>14}{mark}"
        )
    over = flagged(matches)
    print(f"{len(matches)} day/model pairs in {currency}; {len(over)} over the threshold")
    return 1 if over else 0


# -- fx ----------------------------------------------------------------------------------


def cmd_fx_add(args: argparse.Namespace) -> int:
    from gateway.finance.fx import FxRate

    try:
        rate = FxRate(args.currency, args.effective_from, args.per_usd)
    except ValueError as err:
        return _fail(str(err))
    return _save_rates(args, [rate], "cli")


def cmd_fx_import(args: argparse.Namespace) -> int:
    from db.analytics.fx_store import FxImportError, parse_rates_csv

    try:
        rates = parse_rates_csv(args.file.read_text(encoding="utf-8-sig"))
    except (OSError, FxImportError) as err:
        return _fail(f"{args.file}: {err}")
    return _save_rates(args, rates, f"csv:{args.file.name}")


def _save_rates(args: argparse.Namespace, rates: list[Any], source: str) -> int:
    from db.analytics.fx_store import save_rates, sync_dated_versions

    cfg, _ = load_for_command(args.config)
    url = _url()
    saved = save_rates(url, rates, source)
    new_versions = sync_dated_versions(url, cfg)
    print(f"{saved} FX rate(s) saved; {new_versions} new price version(s) stored")
    print("replicas price new requests at the rate in force on their day within "
          f"{cfg.ledger.fx_refresh_s:g} s (ledger.fx_refresh_s)")
    return 0


def cmd_fx_list(args: argparse.Namespace) -> int:
    from db.analytics.fx_store import load_schedule

    for r in load_schedule(_url()).rates():
        rate = format(r.per_usd.normalize(), "f")
        print(f"{r.currency}  from {r.effective_from.isoformat()}  {rate} per USD")
    return 0
