from __future__ import annotations

import subprocess
import sys

from dashboard.auth import USERS_ENV, load_users, verify_password
from gateway.cli.dashboard import dashboard_env, streamlit_command
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
    assert users["admin"].role == "ops"
    assert password and verify_password(password, users["admin"].password_hash)


def test_configured_users_are_left_alone():
    env, password = dashboard_env({USERS_ENV: "bob:viewer:" + "0" * 64}, None)
    assert password is None and env[USERS_ENV] == "bob:viewer:" + "0" * 64


def test_dashboard_and_seed_commands_parse():
    args = build_parser().parse_args(["dashboard", "--port", "19401"])
    assert args.port == 19401 and args.func.__name__ == "run_dashboard"
    assert "19401" in streamlit_command("127.0.0.1", 19401)
    args = build_parser().parse_args(["seed", "--rows", "1000000"])
    assert args.rows == 1_000_000 and args.func.__name__ == "seed_command"
