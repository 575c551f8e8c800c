"""`costgate sim`: the upstream simulator, in the foreground."""

from __future__ import annotations

from typing import Any


def register(subparsers: Any) -> None:
    from gateway.devtools.sim.main import add_arguments, run

    parser = subparsers.add_parser(
        "sim", help="run the OpenAI-compatible upstream simulator",
        description="Serve every model of the configuration like its provider would, with "
        "the latencies, lengths and faults of the file's `sim:` section.",
    )
    add_arguments(parser)
    parser.set_defaults(func=run)

