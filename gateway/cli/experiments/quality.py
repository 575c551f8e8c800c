"""`costgate quality signals [--days 7]`: the automatic quality signals' rates per model and
alias (docs/QUALITY.md): errors, fallbacks, truncations, content filters, refusals,
invalid JSON and invalid tool arguments, each among the rows where it applies."""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
from typing import Any

from gateway.domain.environment import environment


def register(sub: Any) -> None:
    quality = sub.add_parser("quality", help="quality signals per model and alias")
    qsub = quality.add_subparsers(dest="quality_command", required=True, metavar="ACTION")
    signals = qsub.add_parser("signals", help="signal rates per model and alias")
    signals.add_argument("--days", type=int, default=7, help="the last N days (default 7)")
    signals.add_argument("--json", action="store_true")
    signals.set_defaults(func=cmd_signals)


def _pct(rate: float | None) -> str:
    return "-" if rate is None else f"{rate:.1%}"


def cmd_signals(args: argparse.Namespace) -> int:
    from db.engine import engine_scope
    from db.quality.signal_rates import signal_rates

    hi = dt.datetime.now(dt.UTC)
    with engine_scope(environment().database_url_value) as engine:
        rows = signal_rates(engine, hi - dt.timedelta(days=max(args.days, 1)), hi)
    if args.json:
        print(json.dumps([dataclasses.asdict(r) for r in rows], indent=2))
        return 0
    print(f"{'model':<22} {'alias':<10} {'requests':>8} {'errors':>7} {'fallback':>8} "
          f"{'truncated':>9} {'filtered':>8} {'refusals':>8} {'bad JSON':>8} "
          f"{'bad tools':>9}")  # fmt: skip
    for r in rows:
        print(f"{r.model:<22} {r.alias or '-':<10} {r.requests:>8} {_pct(r.error_rate):>7} "
              f"{_pct(r.fallback_rate):>8} {_pct(r.truncated_rate):>9} "
              f"{_pct(r.content_filter_rate):>8} {_pct(r.refusal_rate):>8} "
              f"{_pct(r.json_invalid_rate):>8} {_pct(r.tool_args_invalid_rate):>9}")  # fmt: skip
    if not rows:
        print("no requests in the period")
    return 0
