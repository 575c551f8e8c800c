"""The simulator's own command line: `python -m gateway.devtools.sim` and `costgate sim`."""

from __future__ import annotations

import argparse
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="configuration file (default: $COSTGATE_CONFIG "
                        "or config/costgate.example.yaml)")
    parser.add_argument("--host", help="listen address (default: sim.host, 127.0.0.1)")
    parser.add_argument("--port", type=int, help="listen port (default: sim.port, 9100)")


def run(args: argparse.Namespace) -> int:
    from gateway.devtools.sim.server import serve
    from gateway.devtools.sim.settings import parse_sim_settings, served_models
    from gateway.domain.config import ConfigError, default_config_path, load_config

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
    parser = argparse.ArgumentParser(prog="python -m gateway.devtools.sim")
    add_arguments(parser)
    try:
        return run(parser.parse_args(argv))
    except KeyboardInterrupt:
        return 130
