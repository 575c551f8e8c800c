"""`costgate demo`: the whole product on one machine, in the foreground.

The simulated providers, the gateway on Ray Serve (with the embedded PostgreSQL unless
DATABASE_URL is set), a bounded traffic generator speaking as three apps, and the
dashboard. Ctrl-C stops all of it, in the reverse order, and leaves no process behind.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from dashboard.auth import hash_password
from gateway.devtools.demo_quality import DemoRaters, start_demo_experiment
from gateway.domain.config import Config
from gateway.domain.environment import environment

# in this order the traffic gives them their features (gateway.devtools.traffic_audience)
DEMO_APPS = (("web-chat", "product"), ("support-bot", "customer-care"), ("code-assistant", "eng"))
DASHBOARD_PORT = 8501
# synthetic history written before the live traffic, so the first look shows real charts:
# marked as seeded (gateway/devtools/seed.py), `costgate seed --remove` takes it out
DEMO_SEED_DAYS = 30
DEMO_SEED_ROWS = 30_000
# demo sign-ins, one per role, each named after its role with the password demo-<role>
# (admin / demo-admin, finance / demo-finance, ops / demo-ops, viewer / demo-viewer),
# salted PBKDF2 like any configured user (the dashboard refuses anything weaker), made
# afresh when the demo starts; a real deployment sets COSTGATE_DASHBOARD_USERS itself.
# The banner names them in this order: admin and finance first, who see the money
# (Savings, Spend, Customers), then ops and viewer, who see less of it or none
DEMO_ROLES = {
    "admin": "every page",
    "finance": "spend, savings, budgets, customers",
    "ops": "latency, requests, routing; no spend",
    "viewer": "spend and latency, read-only",
}
DEMO_DASHBOARD_USERS = ",".join(
    f"{name}:{name}:{hash_password(f'demo-{name}')}" for name in DEMO_ROLES
)


def sign_in_lines() -> list[str]:
    """The banner's sign-ins, one a line: name / password (what the role sees)."""
    return [f"{name} / demo-{name} ({sees})" for name, sees in DEMO_ROLES.items()]


def _demo_keys(database_url: str, state: Path) -> list[str]:
    """One key per demo app, created once and kept (mode 600) under the state dir."""
    from db.keys import create_key, list_keys

    path = state / "demo-keys.json"
    try:
        keys = json.loads(path.read_text())
        active = {str(k.key_id) for k in list_keys(database_url) if k.revoked_at is None}
        if all(entry["id"] in active for entry in keys):
            return [entry["key"] for entry in keys]
    except (OSError, ValueError, KeyError):
        pass
    keys = []
    for app, team in DEMO_APPS:
        key, listing = create_key(database_url, app, team)
        keys.append({"id": str(listing.key_id), "key": key, "app": app})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(keys))
    path.chmod(0o600)
    return [entry["key"] for entry in keys]


def _seed_history(database_url: str, cfg: Config) -> None:
    """DEMO_SEED_DAYS of seeded history ending now, once per ledger (kept on restarts)."""
    from gateway.devtools.seed import holds_seeded, seed_ledger

    if holds_seeded(database_url):
        return
    print(
        f"[demo] seeding {DEMO_SEED_DAYS} days of synthetic history ({DEMO_SEED_ROWS:,} "
        "requests, marked as seeded; `costgate seed --remove` removes them)"
    )
    seed_ledger(database_url, cfg, DEMO_SEED_ROWS, days=DEMO_SEED_DAYS)


def _start_sim(config_path: Path, log_dir: Path) -> subprocess.Popen[bytes]:
    log = open(log_dir / "sim.log", "ab")  # noqa: SIM115 - lives as long as the process
    return subprocess.Popen(
        [sys.executable, "-m", "gateway.devtools.sim", "--config", str(config_path)],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _start_dashboard(config_path: Path, log_dir: Path, env: dict[str, str]) -> Any:
    log = open(log_dir / "dashboard.log", "ab")  # noqa: SIM115
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gateway.cli",
            "dashboard",
            "--config",
            str(config_path),
            "--port",
            str(DASHBOARD_PORT),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )


def _wait_http(url: str, timeout_s: float) -> bool:
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=2).status_code < 500:
                return True
        time.sleep(0.3)
    return False


def _stop(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)


def run_demo(cfg: Config, config_path: Path, args: argparse.Namespace) -> int:
    from db.embedded import embedded_running, state_dir, stop_embedded
    from db.migrate import migrated_database_url
    from db.price_sync import sync_prices
    from gateway.control.cluster import (
        ClusterError,
        ClusterPaths,
        dashboard_url,
        deploy,
        gateway_url,
        shutdown_serve,
        start_head,
        stop_head,
        token_location,
        wait_ready,
    )
    from gateway.control.control_key import ensure_control_key

    t0 = time.monotonic()
    state = state_dir()
    logs = state / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    sim = dashboard = None
    started_ray = False
    # the embedded PostgreSQL is the demo's to stop only if the demo is what starts it
    started_pg = not environment().database_url_value and not embedded_running()
    stop = asyncio.Event()
    rating_stop = threading.Event()
    paths = ClusterPaths(state)
    # Ctrl-C and SIGTERM end up in one place, the finally below, which stops everything
    # in the reverse order of start (SIGINT explicitly: a shell may have ignored it)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        sim_host, sim_port = cfg.sim.get("host", "127.0.0.1"), cfg.sim.get("port", 9100)
        print(f"[demo] starting the simulated providers on {sim_host}:{sim_port}")
        sim = _start_sim(config_path, logs)
        if not _wait_http(f"http://{sim_host}:{sim_port}/v1/models", 30):
            print("[demo] the simulator did not start; see .state/logs/sim.log", file=sys.stderr)
            return 1
        print("[demo] preparing the ledger (PostgreSQL, migrations, prices)")
        database_url = migrated_database_url()
        sync_prices(database_url, cfg)
        _seed_history(database_url, cfg)
        keys = _demo_keys(database_url, state)
        admin_key_file = ensure_control_key(database_url, state)
        env = dict(os.environ, DATABASE_URL=database_url, COSTGATE_STATE_DIR=str(state))
        env.setdefault("COSTGATE_DASHBOARD_USERS", DEMO_DASHBOARD_USERS)
        for provider in cfg.providers:
            if provider.api_key_env:
                env.setdefault(provider.api_key_env, f"sk-demo-{provider.name}")
        print("[demo] starting Ray and deploying the gateway (about 30 s on 2 cores)")
        started_ray = start_head(cfg, paths, env)
        deploy(cfg, config_path=config_path, state_dir=state)
        wait_ready(cfg)
        print(f"[demo] gateway ready in {time.monotonic() - t0:.1f} s")
        print(f"[demo] {start_demo_experiment(cfg, database_url)}")
        raters = DemoRaters(cfg, database_url, gateway_url(cfg),
                            dict(zip((a for a, _ in DEMO_APPS), keys, strict=True)), rating_stop)
        raters.start()  # a share of the live answers rated through /v1/feedback
        dashboard = _start_dashboard(config_path, logs, env)
        dash_ok = _wait_http(f"http://127.0.0.1:{DASHBOARD_PORT}/_stcore/health", 60)
        print()
        print(f"  Gateway (OpenAI base_url): {gateway_url(cfg)}/v1")
        print(f"  Prometheus metrics:        {gateway_url(cfg)}/metrics")
        if dash_ok:
            print(f"  Dashboard:                 http://127.0.0.1:{DASHBOARD_PORT}")
            if env["COSTGATE_DASHBOARD_USERS"] == DEMO_DASHBOARD_USERS:
                first, *others = sign_in_lines()
                print(f"  Sign in as:                {first}")
                for line in others:
                    print(f"                         or  {line}")
        else:
            print("  Dashboard:                 did not start (see .state/logs/dashboard.log)")
        print(f"  Ray dashboard:             {dashboard_url(cfg)}")
        print(f"  Ray's token (that page):   {token_location(paths, env)}")
        print(f"  Demo app keys:             {state / 'demo-keys.json'}")
        if admin_key_file is not None:
            print(f"  Admin key (routing):       {admin_key_file}")
        print("\n[demo] running; Ctrl-C stops everything\n")
        if args.no_traffic:
            while True:
                time.sleep(3600)
        else:
            from gateway.devtools.traffic import run_traffic

            asyncio.run(
                run_traffic(
                    gateway_url(cfg) + "/v1",
                    keys,
                    cfg,
                    max_requests=args.requests,
                    max_seconds=args.duration,
                    stop_event=stop,
                    on_progress=lambda line: print(f"[demo] {line}", flush=True),
                )
            )
            print("[demo] traffic finished; the gateway keeps running until Ctrl-C")
            while True:
                time.sleep(3600)
    except KeyboardInterrupt:
        print("\n[demo] stopping")
    except ClusterError as err:
        print(f"[demo] {err}", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not skip clean-up
        rating_stop.set()
        _stop(dashboard)
        with contextlib.suppress(Exception):
            shutdown_serve(cfg, progress=lambda line: print(f"[demo] {line}"))
        if started_ray:
            stop_head(paths)
        _stop(sim)
        if started_pg:
            with contextlib.suppress(Exception):
                stop_embedded()
        print("[demo] stopped")
    return 0
