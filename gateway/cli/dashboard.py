"""`costgate dashboard` (the Streamlit app), `costgate dashboard hash-password`, `costgate seed`."""

from __future__ import annotations

import argparse
import getpass
import os
import secrets
import sys
from pathlib import Path

# what Streamlit serves: dashboard/app.py, with the route that sets the session cookie
SERVER = Path(__file__).resolve().parents[2] / "dashboard" / "access" / "server.py"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("dashboard", help="run the Streamlit dashboard")
    p.add_argument("--port", type=int, default=8501)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--config", help="costgate YAML (default: $COSTGATE_CONFIG or the example)")
    p.set_defaults(func=run_dashboard)
    dsub = p.add_subparsers(dest="dashboard_command", metavar="SUBCOMMAND")
    h = dsub.add_parser("hash-password", help="print a password hash for COSTGATE_DASHBOARD_USERS")
    h.add_argument("--password-stdin", action="store_true", help="read the password from stdin")
    h.set_defaults(func=hash_password_command)

    s = sub.add_parser("seed", help="write synthetic usage history into the ledger")
    s.add_argument(
        "--rows",
        type=int,
        default=100_000,
        help="requests to write; past a million, the database copies a drawn million",
    )
    s.add_argument("--days", type=int, default=75, help="history length, ending now")
    s.add_argument(
        "--end-users",
        type=int,
        default=5_000,
        help="end users (customers) over all apps, a long tail: a few heavy, many light",
    )
    s.add_argument("--seed", type=int, default=7, help="random seed (same seed, same rows)")
    s.add_argument("--config", help="costgate YAML (default: $COSTGATE_CONFIG or the example)")
    s.add_argument(
        "--remove", action="store_true", help="delete the seeded rows (and only them) instead"
    )
    s.set_defaults(func=seed_command)


def hash_password_command(args: argparse.Namespace) -> int:
    from dashboard.auth import hash_password

    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    else:
        password = getpass.getpass("Password: ")
        if getpass.getpass("Again: ") != password:
            print("the passwords differ", file=sys.stderr)
            return 2
    if not password:
        print("empty password", file=sys.stderr)
        return 2
    print(hash_password(password))
    return 0


def dashboard_env(environ: dict[str, str], config: str | None) -> tuple[dict[str, str], str | None]:
    """The server's environment; without configured users, a one-time `admin` user.

    Returns the environment and the generated password (None when users are configured).
    """
    from dashboard.auth import USERS_ENV, USERS_FILE_ENV, hash_password

    env = dict(environ)
    if config:
        env["COSTGATE_CONFIG"] = str(Path(config).resolve())
    if env.get(USERS_ENV) or env.get(USERS_FILE_ENV):
        return env, None
    password = secrets.token_urlsafe(12)
    env[USERS_ENV] = f"admin:admin:{hash_password(password)}"
    return env, password


def sign_in_problem(env: dict[str, str]) -> str | None:
    """Why the dashboard's sign-in could not work with `env` (a users entry that is
    refused, such as a bare SHA-256 digest; an unusable session secret), or None.

    Checked before the server starts, so that the error reaches the terminal naming the
    user (never the hash) instead of waiting on the sign-in page. It also makes the state
    dir's session secret, once, before several processes could race to.
    """
    from dashboard.access.sessions import SessionConfigError, load_secret
    from dashboard.auth import AuthConfigError, load_users
    from gateway.domain.environment import Environment

    try:
        load_users(env)
        load_secret(Environment.model_validate(env))
    except (AuthConfigError, SessionConfigError) as err:
        return str(err)
    return None


def streamlit_command(host: str, port: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "dashboard.serve",  # Streamlit's command line, the warm-up started first
        "run",
        str(SERVER),
        "--server.address",
        host,
        "--server.port",
        str(port),
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
        "--client.toolbarMode",
        "minimal",
        # a served dashboard does not reload its own sources: Streamlit's watcher would
        # otherwise resolve the path of every imported module after each run, on the
        # server's event loop (measured, 0.3 s of the first sign-in on a 2-core machine)
        "--server.fileWatcherType",
        "none",
        "--server.runOnSave",
        "false",
    ]


def run_dashboard(args: argparse.Namespace) -> int:
    env, password = dashboard_env(dict(os.environ), args.config)
    problem = sign_in_problem(env)
    if problem is not None:
        print(f"costgate dashboard: cannot start: {problem}", file=sys.stderr)
        return 2
    print(f"costgate dashboard: http://{args.host}:{args.port}", flush=True)
    if password is not None:
        print(
            "No dashboard users configured (COSTGATE_DASHBOARD_USERS): sign in as "
            f"`admin` with the one-time password {password}",
            flush=True,
        )
    # become the server: signals (Ctrl-C, a demo's SIGTERM) reach Streamlit directly;
    # os.execve does not return (it raises OSError if it cannot run Streamlit)
    command = streamlit_command(args.host, args.port)
    os.execve(command[0], command, env)


def seed_command(args: argparse.Namespace) -> int:
    import time

    from db.engine import database_url
    from db.migrate import upgrade
    from gateway.devtools.seed import remove_seeded, seed_ledger
    from gateway.domain.config import default_config_path, load_config

    if args.remove:
        url = database_url()
        upgrade(url)
        print(f"removed {remove_seeded(url):,} seeded requests")
        return 0
    if args.rows < 1 or args.days < 1:
        print("--rows and --days must be positive", file=sys.stderr)
        return 2
    if args.end_users < 0:
        print("--end-users must not be negative", file=sys.stderr)
        return 2
    cfg = load_config(args.config or default_config_path())
    url = database_url()
    upgrade(url)
    began = time.perf_counter()
    report = seed_ledger(
        url,
        cfg,
        args.rows,
        days=args.days,
        seed=args.seed,
        progress=lambda n: print(f"  {n:,} rows…", flush=True),
        end_users=args.end_users,
    )
    took = time.perf_counter() - began
    print(
        f"seeded {report.rows:,} requests from {report.start:%Y-%m-%d} to "
        f"{report.end:%Y-%m-%d} (UTC), {report.apps} apps, {report.keys} keys, in {took:.1f} s "
        f"({report.rows / took:,.0f} rows/s); {report.end_users:,} distinct end users, "
        f"{report.tag_values} distinct tag values"
    )
    return 0
