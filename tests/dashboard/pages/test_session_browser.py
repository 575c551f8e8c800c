"""The sign-in's closed surfaces in a real browser (Debian's Chromium, headless) against
a real dashboard process: the session cookie is the server's HttpOnly one, no page script
reads it; a password change ends the session opened with the old one; a client's 21
wrong sign-ins (behind the same local proxy, told apart by X-Forwarded-For) do not stop
another client signing in, as the same user."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from dashboard.auth import MIN_PBKDF2_ITERATIONS, USERS_FILE_ENV, hash_password
from gateway.domain.config import default_config_path
from tests.dashboard.pages.test_browser import session_cookie, settle, sign_in
from tests.dashboard.support.dashboard_process import running_dashboard

pytestmark = pytest.mark.browser

DASHBOARD_PORT_OFFSET = 89


def write_users(path: Path, vic_password: str) -> None:
    cheap = MIN_PBKDF2_ITERATIONS
    path.write_text(f"vic:viewer:{hash_password(vic_password, cheap)}\n"
                    f"olga:ops:{hash_password('ops-pass', cheap)}\n")  # fmt: skip


@pytest.fixture(scope="module")
def users_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("session-users") / "users"
    write_users(path, "view-pass")
    return path


@pytest.fixture(scope="module")
def session_dashboard(database_url, port_block, tmp_path_factory, users_file) -> Iterator[str]:
    port = port_block.port(DASHBOARD_PORT_OFFSET)
    workdir = tmp_path_factory.mktemp("session-dashboard")
    env = {k: v for k, v in os.environ.items() if k != "COSTGATE_DASHBOARD_USERS"}
    env.update(
        DATABASE_URL=database_url,
        COSTGATE_STATE_DIR=str(workdir / "state"),
        COSTGATE_DASHBOARD_REFRESH_S="3600",
        # the test's browsers stand behind a proxy on this host, as behind an ingress
        COSTGATE_DASHBOARD_TRUSTED_PROXIES="127.0.0.1,::1",
    )
    env[USERS_FILE_ENV] = str(users_file)
    with running_dashboard(port, env, default_config_path(), workdir / "streamlit.log") as url:
        yield url


def client(browser: Browser, address: str) -> Page:
    context = browser.new_context(viewport={"width": 1400, "height": 1000},
                                  extra_http_headers={"x-forwarded-for": address})  # fmt: skip
    return context.new_page()


@pytest.mark.usefixtures("clean_ledger")
def test_the_session_cookie_is_httponly_and_a_password_change_ends_the_session(
    session_dashboard: str, browser: Browser, users_file: Path
) -> None:
    page = client(browser, "203.0.113.10")
    sign_in(page, session_dashboard, "vic", "view-pass")
    cookie = session_cookie(page)
    assert cookie is not None and cookie["httpOnly"] is True
    assert cookie["sameSite"] == "Strict"
    assert "costgate_session" not in page.evaluate("document.cookie")
    page.reload()  # the cookie signs the new Streamlit session in
    expect(page.get_by_text("Signed in as vic (viewer)")).to_be_visible(timeout=60_000)
    settle(page)

    write_users(users_file, "a-new-password")
    page.reload()
    expect(page.get_by_role("button", name="Sign in")).to_be_visible(timeout=60_000)
    expect(page.get_by_text("Signed in as vic")).to_have_count(0)
    sign_in(page, session_dashboard, "vic", "a-new-password")
    page.context.close()


def test_a_clients_wrong_sign_ins_do_not_stop_another_client(
    session_dashboard: str, browser: Browser
) -> None:
    guesser = client(browser, "203.0.113.66")
    guesser.goto(session_dashboard)
    for i in range(21):
        guesser.get_by_role("textbox", name="Name").fill("olga")
        guesser.get_by_role("textbox", name="Password").fill(f"guess-{i}")
        guesser.get_by_role("button", name="Sign in").click()
        settle(guesser)
    expect(guesser.get_by_text("Too many failed sign-ins")).to_be_visible()
    guesser.context.close()
    # olga herself, from her own address behind the same proxy, signs in at once
    olga = client(browser, "198.51.100.7")
    sign_in(olga, session_dashboard, "olga", "ops-pass", lands_on="Latency & errors")
    olga.context.close()
