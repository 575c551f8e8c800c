"""The `--config` option the costgate commands share, and loading it for a command.

A bad file ends the command with the validator's key-path message and exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gateway.domain.config import Config, ConfigError, default_config_path, load_config

CONFIG_HELP = "costgate YAML (default: $COSTGATE_CONFIG or config/costgate.example.yaml)"


def add_config_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, default=None, help=CONFIG_HELP)


def load_for_command(path: Path | None) -> tuple[Config, Path]:
    """The configuration a command runs with, and its resolved path."""
    resolved = Path(path or default_config_path()).resolve()
    try:
        return load_config(resolved), resolved
    except ConfigError as err:
        print(f"costgate: {err}", file=sys.stderr)
        raise SystemExit(2) from None
