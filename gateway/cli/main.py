"""`costgate`: one console script; each command group lives in its own module.

The modules are imported only when their command runs, so `costgate sim` does not pay
for importing Ray, and `costgate keys` does not pay for Streamlit.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# command-group modules; each exposes register(subparsers) and sets args.func
COMMAND_MODULES = (
    "gateway.cli.cluster.up",  # up
    "gateway.cli.cluster",  # down, demo, serve-config
    "gateway.cli.sim",  # sim
    "gateway.cli.bench",  # bench
    "gateway.cli.db",  # migrate, keys
    "gateway.cli.budgets",  # budgets set|list|remove|history
    "gateway.cli.alerts",  # alerts run (budget gauges and webhooks)
    "gateway.cli.routing",  # routing show|set
    "gateway.cli.dashboard",  # dashboard, seed
    "gateway.cli.deploy",  # k8s-manifest
    "gateway.cli.chaos",  # chaos (failure scenarios, soak)
    "gateway.cli.finance",  # export focus, whatif, reconcile, fx add|import|list
    "gateway.cli.report",  # report (usage and costs), rollups rebuild|prune|close|status
    "gateway.cli.users",  # users forget (erasure of an end user)
    "gateway.cli.experiments",  # experiments start|list|show|stop|promote
    "gateway.cli.experiments.quality",  # quality signals (rates per model and alias)
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="costgate", description="An OpenAI-compatible LLM gateway with a cost ledger."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
