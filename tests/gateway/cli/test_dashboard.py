from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys

from dashboard.auth import (
    MIN_PBKDF2_ITERATIONS,
    USERS_ENV,
    hash_password,
    load_users,
    verify_password,
)
from gateway.cli.dashboard import dashboard_env, sign_in_problem, streamlit_command
from gateway.cli.main import build_parser


def test_hash_password_prints_a_hash_that_verifies():
    out = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "dashboard", "hash-password", "--password-stdin"],
        input="correct horse\n",
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert verify_password("correct horse", out)
    assert "correct horse" not in out


def test_without_users_a_one_time_admin_password_is_made():
    env, password = dashboard_env({}, None)
    users = load_users(env)
    assert users["admin"].role == "admin"
    assert password and verify_password(password, users["admin"].password_hash)


def test_configured_users_are_left_alone():
    entry = f"bob:viewer:{hash_password('b', MIN_PBKDF2_ITERATIONS)}"
    env, password = dashboard_env({USERS_ENV: entry}, None)
    assert password is None and env[USERS_ENV] == entry


def test_a_bare_sha256_user_stops_the_dashboard_at_start_naming_the_user(tmp_path):
    digest = hashlib.sha256(b"pw").hexdigest()
    env = dict(os.environ, COSTGATE_STATE_DIR=str(tmp_path))
    env[USERS_ENV] = f"bob:viewer:{digest}"
    env.pop("COSTGATE_DASHBOARD_USERS_FILE", None)
    done = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "dashboard", "--port", "19402"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2  # before Streamlit would start
    assert "cannot start" in done.stderr and "(bob)" in done.stderr
    assert "bare SHA-256" in done.stderr and digest not in done.stderr + done.stdout


def test_the_start_check_makes_the_session_secret_once(tmp_path):
    env = {USERS_ENV: f"bob:viewer:{hash_password('b', MIN_PBKDF2_ITERATIONS)}"}
    env["COSTGATE_STATE_DIR"] = str(tmp_path)
    assert sign_in_problem(env) is None
    secret = tmp_path / "dashboard-secret"
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    short = dict(env, COSTGATE_DASHBOARD_SECRET="too-short")
    assert "shorter than 32" in (sign_in_problem(short) or "")


def test_dashboard_and_seed_commands_parse():
    args = build_parser().parse_args(["dashboard", "--port", "19401"])
    assert args.port == 19401 and args.func.__name__ == "run_dashboard"
    assert "19401" in streamlit_command("127.0.0.1", 19401)
    args = build_parser().parse_args(["seed", "--rows", "1000000"])
    assert args.rows == 1_000_000 and args.func.__name__ == "seed_command"


def test_the_served_dashboard_does_not_watch_its_sources():
    """Streamlit's default watcher resolves every imported module's path after each run,
    on the server's event loop; a served dashboard never reloads its code."""
    from streamlit import config

    command = streamlit_command("127.0.0.1", 19401)
    pairs = dict(zip(command[5::2], command[6::2], strict=False))
    assert pairs["--server.fileWatcherType"] == "none"
    assert pairs["--server.runOnSave"] == "false"
    # options this Streamlit knows: a rename would make its CLI refuse to start
    options = config.get_config_options()
    assert {"server.fileWatcherType", "server.runOnSave"} <= options.keys()


def test_the_dashboard_process_is_streamlits_command_line_with_the_warm_up_first():
    """`dashboard.serve` runs Streamlit's own CLI (the same `run app.py --server...`
    arguments), having started the warm-up before the first browser connects."""
    import subprocess
    import sys

    command = streamlit_command("127.0.0.1", 19401)
    assert command[1:4] == ["-m", "dashboard.serve", "run"]
    # the launcher hands its arguments to Streamlit's CLI unchanged
    done = subprocess.run(
        [sys.executable, "-m", "dashboard.serve", "run", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "Run a Python script" in done.stdout and "--server.port" in done.stdout
