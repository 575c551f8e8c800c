"""`costgate sim`: the upstream simulator, in the foreground."""

from __future__ import annotations

import argparse
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "sim", help="run the OpenAI-compatible upstream simulator",
        description="Serve every model of the configuration like its provider would, with "
        "the latencies, lengths and faults of the file's `sim:` section.",
    )
    add_arguments(parser)
    parser.set_defaults(func=run)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="configuration file (default: $COSTGATE_CONFIG "
                        "or config/costgate.example.yaml)")
    parser.add_argument("--host", help="listen address (default: sim.host, 127.0.0.1)")
    parser.add_argument("--port", type=int, help="listen port (default: sim.port, 9100)")


def run(args: argparse.Namespace) -> int:
    from gateway.config import ConfigError, default_config_path, load_config
    from gateway.sim.server import serve
    from gateway.sim.settings import parse_sim_settings, served_models

    path = args.config or default_config_path()
    try:
        config = load_config(path)
        settings = parse_sim_settings(config.sim)
    except ConfigError as err:
        print(err, file=sys.stderr)
        return 2
    host = args.host or settings.host
    port = args.port or settings.port
    print(f"costgate sim: http://{host}:{port} ({path})", flush=True)
    serve(settings, served_models(config, settings), host, port)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gateway.sim")
    add_arguments(parser)
    try:
        return run(parser.parse_args(argv))
    except KeyboardInterrupt:
        return 130
