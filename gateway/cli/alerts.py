"""`costgate alerts run`: the budget watch (gateway/alerts/watch.py): per-budget gauges on
its own `/metrics` for Prometheus, and threshold webhooks to COSTGATE_ALERT_WEBHOOK_URL
(a secret: never printed). Without that variable it exports the gauges and sends nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from typing import Any

DEFAULT_PORT = 9108


def register(sub: Any) -> None:
    alerts = sub.add_parser("alerts", help="budget alerts: gauges and webhooks")
    asub = alerts.add_subparsers(dest="alerts_command", required=True, metavar="ACTION")
    run = asub.add_parser("run", help="run the budget watch until stopped")
    run.add_argument("--host", default="127.0.0.1")
    run.add_argument("--port", type=int, default=DEFAULT_PORT)
    run.add_argument("--interval", type=float, default=15.0, metavar="SECONDS")
    run.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from db.engine import make_engine
    from gateway.alerts.notifier import BudgetNotifier
    from gateway.alerts.watch import BudgetWatch, run_watch
    from gateway.alerts.webhook import WebhookSender
    from gateway.domain.environment import environment

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    engine = make_engine()
    secret = environment().alert_webhook_url
    notifier = None
    if secret is not None and secret.get_secret_value().strip():
        notifier = BudgetNotifier(engine, WebhookSender(secret.get_secret_value().strip()))
    else:
        print("COSTGATE_ALERT_WEBHOOK_URL is unset: gauges only, no webhooks")
    watch = BudgetWatch(engine, notifier, interval_s=args.interval)
    print(f"budget watch: http://{args.host}:{args.port}/metrics, every {args.interval:g} s")
    try:
        asyncio.run(run_watch(watch, args.host, args.port))
    finally:
        engine.dispose()
    return 0
