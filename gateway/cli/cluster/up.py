"""`costgate up`: the ledger's database made ready beside the Ray head's start, then the
gateway deployed and waited for, each step timed.

Migrations, the price sync and the control key need PostgreSQL, not Ray, and Ray's head
needs only the database's URL: the two run at once. Both must be done before the deploy
(replicas read the keys and the prices at start, and write to the migrated schema).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from gateway.cli.config_option import add_config_option
from gateway.domain.environment import environment

# the schema revision the last successful `up` migrated to, in the state dir
MIGRATED_FILE = "schema_revision"


def register(sub: Any) -> None:
    up = sub.add_parser("up", help="start Ray (if needed), deploy the gateway, wait until ready")
    add_config_option(up)
    up.add_argument("--timeout", type=float, default=240.0, help="seconds to wait for ready")
    up.add_argument(
        "--foreground",
        action="store_true",
        help="stay in the foreground; on SIGTERM or Ctrl-C do what `down` does (containers)",
    )
    up.set_defaults(func=cmd_up)



class StepClock:
    """Wall seconds per step of `up`, printed in one line at the end."""

    def __init__(self) -> None:
        self._last = self._start = time.monotonic()
        self.steps: list[tuple[str, float]] = []

    def lap(self, name: str, since: float | None = None) -> None:
        now = time.monotonic()
        self.steps.append((name, now - (self._last if since is None else since)))
        self._last = now

    def total(self) -> float:
        return time.monotonic() - self._start

    def line(self) -> str:
        return ", ".join(f"{name} {seconds:.1f} s" for name, seconds in self.steps)


def _prepare_database(url: str, cfg: Any, state: Path) -> tuple[Path | None, float]:
    """Migrations, the price sync and the control key; (the admin key's file, seconds)."""
    from db.migrate import head_revision, upgrade
    from db.price_sync import sync_prices
    from gateway.control.control_key import ensure_control_key

    started = time.monotonic()
    upgrade(url)
    migrated = state / MIGRATED_FILE
    migrated.parent.mkdir(parents=True, exist_ok=True)
    migrated.write_text(f"{head_revision()}\n")
    sync_prices(url, cfg)
    # before the replicas start: their first key load then already holds it
    key_file = ensure_control_key(url, state)
    return key_file, time.monotonic() - started


def _reachable(url: str) -> None:
    """One connection, so that an unreachable PostgreSQL is known before Ray starts
    (raises sqlalchemy's OperationalError)."""
    from db.engine import make_engine

    engine = make_engine(url, pool_size=1, max_overflow=0)
    try:
        with engine.connect():
            pass
    finally:
        engine.dispose()


def cmd_up(args: argparse.Namespace) -> int:
    import sqlalchemy.exc

    from db.engine import database_url
    from gateway.cli.cluster import _cache_line, _load, _reason, _state_dir, _wait_for_stop_signal
    from gateway.control.cluster import (
        ClusterError,
        ClusterPaths,
        dashboard_url,
        deploy,
        gateway_url,
        start_head,
        token_location,
        wait_ready,
    )
    from gateway.control.replicas import running_replicas

    cfg, path = _load(args)
    try:  # hashing on and its secret unset: refuse, rather than store end users in clear
        cfg.ledger.end_user_ids()
    except ValueError as err:
        print(f"costgate up: {err}", file=sys.stderr)
        return 1
    clock = StepClock()
    state = _state_dir()
    url = database_url()
    prepared: Future[tuple[Path | None, float]] | None = None
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="costgate-db")
    try:
        _reachable(url)
    except sqlalchemy.exc.OperationalError as err:
        refused = _unreachable(cfg, state, err)
        if refused is not None:
            return refused
    else:
        prepared = pool.submit(_prepare_database, url, cfg, state)
    env = dict(os.environ)
    env["DATABASE_URL"] = url
    env["COSTGATE_STATE_DIR"] = str(state)
    paths = ClusterPaths(state)
    admin_key_file: Path | None = None
    try:
        head_started = time.monotonic()
        started = start_head(cfg, paths, env)
        clock.lap("Ray head" if started else "Ray head (running)", head_started)
        # where the token is, never the token: the Ray dashboard's page asks for it
        print(
            f"Ray head {'started' if started else 'already running'} "
            f"(dashboard {environment().ray_dashboard_url(cfg)}, "
            f"token: {token_location(paths, env)})", flush=True,
        )
        if prepared is not None:
            try:
                admin_key_file, db_s = prepared.result()
            except sqlalchemy.exc.OperationalError as err:
                # it answered a moment ago: a first start stops here, a redeploy goes on
                if started:
                    _stop_started_head(paths)
                print(f"costgate up: PostgreSQL failed during migrations ({_reason(err)})",
                      file=sys.stderr)  # fmt: skip
                return 1
            clock.steps.append(("database (beside Ray)", db_s))
            clock.lap("waiting for the database")
        replacing = set() if started else running_replicas(cfg, dashboard_url(cfg))
        deploy(cfg, config_path=path, state_dir=state)
        clock.lap("deploy")
        wait_ready(cfg, timeout_s=args.timeout, replacing=replacing)
        clock.lap("replicas ready")
    except ClusterError as err:
        print(f"costgate up: {err}", file=sys.stderr)
        return 1
    finally:
        pool.shutdown(wait=True)
    print(f"gateway ready at {gateway_url(cfg)}/v1 in {clock.total():.1f} s", flush=True)
    print(f"steps: {clock.line()}", flush=True)
    print(_cache_line(cfg), flush=True)
    if admin_key_file is not None:
        print(f"the control plane's admin key is in {admin_key_file} (mode 600)", flush=True)
    if args.foreground:
        from gateway.cli.cluster import cmd_down

        _wait_for_stop_signal()
        print("stopping", flush=True)
        args.keep_db = False
        return cmd_down(args)
    return 0


def _unreachable(cfg: Any, state: Path, err: Exception) -> int | None:
    """PostgreSQL unreachable: 1 when `up` must stop (said why), None to redeploy anyway.

    A redeploy must not wait for the database: replicas keep their keys, spool their rows
    and catch up once it is back. A first start has nothing to keep.
    """
    from db.migrate import head_revision
    from gateway.cli.cluster import _reason
    from gateway.control.cluster import dashboard_url
    from gateway.control.serve_admin import ServeAdmin

    with ServeAdmin(dashboard_url(cfg)) as admin:
        running = admin.is_up()
    if not running:
        print(f"costgate up: PostgreSQL unreachable ({_reason(err)}); the gateway is "
              "not running, so there is nothing to redeploy without it", file=sys.stderr)
        return 1
    # code that wants a newer schema would write rows the database then refuses
    migrated = state / MIGRATED_FILE
    known = migrated.read_text().strip() if migrated.exists() else None
    if known != head_revision():
        print(f"costgate up: PostgreSQL unreachable ({_reason(err)}), and this code "
              f"needs schema revision {head_revision()} where the database was last "
              f"migrated to {known or 'an unknown revision'}: run `costgate up` again "
              "once it is back", file=sys.stderr)  # fmt: skip
        return 1
    print(f"warning: PostgreSQL unreachable ({_reason(err)}): migrations, price sync "
          "and the control key skipped; redeploying anyway (replicas spool their rows "
          "until it is back)", file=sys.stderr)  # fmt: skip
    return None


def _stop_started_head(paths: Any) -> None:
    from gateway.control.cluster import stop_head

    stop_head(paths)
