"""Time every page's render against the configured ledger.

Renders each page with Streamlit's AppTest (the script run, SQL and pandas included; the
browser's drawing excluded), as a signed-in admin (a user made for the run, with a real
session, since every run checks it on the server) with the default filters (the data's
period, see dashboard.filters.fitted_default). It reports the first run of a fresh
process, then each page with the query cache emptied, then each page again with it warm.

With `--browser URL --user NAME --password PW` it instead drives a running dashboard in
headless Chromium and times each page, in the page's own clock, from the click in the
sidebar until Streamlit's frontend reports the run ended and the page is drawn (its
heading, no skeleton left, every chart drawn by Plotly and every table by its grid; after
the sign-in, the Overview's tiles and two charts). With `--fresh-dashboard` it first starts a
dashboard process of its own (`costgate dashboard` on a free 127.0.0.1 port, a user made
for the run), so that every first visit is the first of a freshly started process, and
stops it at the end.
"""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import time
from pathlib import Path

APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per page; the median is shown")
    parser.add_argument("--browser", metavar="URL", help="time a running dashboard in Chromium")
    parser.add_argument("--user", default="admin")  # the one role that opens every page
    parser.add_argument("--password", default="demo-admin")
    parser.add_argument(
        "--fresh-dashboard", action="store_true", help="start a dashboard of its own and time it"
    )
    parser.add_argument(
        "--typing-s",
        type=float,
        default=0.0,
        help="seconds between the sign-in page drawn and the click on Sign in (a person "
        "typing a name and password; the dashboard warms up meanwhile)",
    )
    args = parser.parse_args(argv)
    if args.fresh_dashboard:
        return time_fresh_dashboard(args.repeat, args.typing_s)
    if args.browser:
        return time_in_browser(args.browser, args.user, args.password, args.repeat, args.typing_s)

    import statistics

    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from dashboard.access.sessions import SessionStore, SessionUser
    from dashboard.auth import USERS_ENV, hash_password
    from dashboard.components.page import PAGES
    from dashboard.components.session import USER_KEY

    logging.disable(logging.WARNING)  # "No runtime found" and the like, once per query

    # AppTest runs the app in this process: a user of its own, for this run only
    credential = hash_password(secrets.token_urlsafe(16))
    os.environ[USERS_ENV] = f"timing:admin:{credential}"
    store = SessionStore.from_environment()
    opened = store.open("timing", credential)
    at = AppTest.from_file(str(APP), default_timeout=600)
    at.session_state[USER_KEY] = SessionUser("timing", "admin", None, opened.session_id)
    began = time.perf_counter()
    at.run()
    print(f"first run in a fresh process (imports + rollup): {time.perf_counter() - began:6.2f} s")
    print(f"{'page':16s} {'query cache empty':>18s} {'query cache warm':>17s}")
    failed = False
    for spec in PAGES:
        page = spec.file
        at.switch_page(f"pages/{page}.py")
        cold, warm = [], []
        for _ in range(args.repeat):
            st.cache_data.clear()
            began = time.perf_counter()
            at.run()
            cold.append(time.perf_counter() - began)
            began = time.perf_counter()
            at.run()
            warm.append(time.perf_counter() - began)
        failed |= bool(at.exception)
        print(
            f"{page:16s} {statistics.median(cold):16.2f} s {statistics.median(warm):15.2f} s"
            + ("  (raised!)" if at.exception else "")
        )
    store.close(opened.session_id)
    return 1 if failed else 0


CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"]


def time_fresh_dashboard(repeat: int, typing_s: float = 0.0) -> int:
    """Start `costgate dashboard` (the ledger of DATABASE_URL), time it in Chromium, stop it."""
    import contextlib
    import signal
    import socket
    import subprocess
    import sys
    import tempfile

    import httpx

    from dashboard.auth import MIN_PBKDF2_ITERATIONS, USERS_ENV, hash_password

    password = secrets.token_urlsafe(16)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    state = tempfile.mkdtemp(prefix="render-timing-")
    env = dict(os.environ, COSTGATE_STATE_DIR=state, COSTGATE_DASHBOARD_REFRESH_S="3600")
    env[USERS_ENV] = f"timing:admin:{hash_password(password, MIN_PBKDF2_ITERATIONS)}"
    command = [sys.executable, "-m", "gateway.cli", "dashboard", "--port", str(port)]
    began = time.perf_counter()
    proc = subprocess.Popen(
        command,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/_stcore/health", timeout=2).status_code == 200:
                    break
            time.sleep(0.2)
        else:
            print("the dashboard did not start")
            return 1
        print(f"dashboard process started in {time.perf_counter() - began:6.2f} s")
        return time_in_browser(url, "timing", password, repeat, typing_s)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)  # its own session: that server, nothing else
        proc.wait(15)


# the time of the page's last click, by the page's own clock
_CLICK_CLOCK = (
    "document.addEventListener('click', () => { window.__costgateClickAt = performance.now(); },"
    " true);"
)


def _drawn(shown: str | None = None, charts: int = 0, page: str | None = None) -> str:
    """A page predicate, stamping the page's clock at the first frame it holds in
    window.__costgateDrawnAt: Streamlit's run has ended, no element waits for its data or
    its code (no skeleton), every chart and table shown is drawn, `shown` (a CSS selector)
    is visible and, with `page`, a heading reads that page's title (the run is the new
    page's, not the old page's last frame)."""
    visible = (  # laid out and not hidden (the sign-in page's warm-up elements are hidden)
        f"[...document.querySelectorAll({shown!r})].some(e => e.getBoundingClientRect()"
        ".height > 0 && getComputedStyle(e).visibility !== 'hidden')"
        if shown
        else "true"
    )
    # The run's end as the frontend knows it (the attribute Streamlit's own end-to-end
    # tests wait on), not the running indicator's absence: that indicator shows only after
    # a delay, so a page whose script was still sending its last table looked finished
    # (measured: Savings reported at 0.49 s, its last table drawn at 0.88 s).
    ended = (
        "document.querySelector('[data-testid=stApp]')?.dataset.testScriptState"
        " === 'notRunning'"
    )
    # every chart shown has its svg layers from Plotly and every table its canvas from the
    # grid: the script's end comes before the browser's drawing, its longest step (and at
    # least `charts` charts: the sign-in's first run may end before the Overview's)
    def shown_of(testid: str) -> str:
        return (
            f"[...document.querySelectorAll('[data-testid={testid}]')].filter(e => "
            "getComputedStyle(e).visibility !== 'hidden')"
        )

    drawn = (
        f"{shown_of('stPlotlyChart')}.every(e => e.querySelector('.js-plotly-plot .main-svg "
        f".xy') !== null) && {shown_of('stPlotlyChart')}.length >= {charts}"
        f" && {shown_of('stDataFrame')}.every(e => e.querySelector('canvas') !== null)"
    )
    heading = (
        "[...document.querySelectorAll('h1, h2, h3')].some("
        f"h => h.textContent.trim() === {page!r} && h.getBoundingClientRect().height > 0)"
        if page
        else "true"
    )
    held = (
        f"{ended} && document.querySelector('[data-testid=stSkeleton]') === null"
        f" && {visible} && {drawn} && {heading}"
    )
    return (
        f"() => {{ const ok = {held};"
        " if (ok) window.__costgateDrawnAt = performance.now(); return ok; }"
    )


def time_in_browser(
    url: str, user: str, password: str, repeat: int, typing_s: float = 0.0
) -> int:
    import statistics

    from playwright.sync_api import sync_playwright

    from dashboard.components.page import PAGES

    # the overview last: the sign-in lands on it, so its first visit is the sign-in's
    browser_pages = [p.title for p in PAGES if p.file != "overview"] + ["Overview"]

    def settled(page, shown: str) -> None:  # type: ignore[no-untyped-def]
        # waited for by a predicate evaluated in the page at every frame, not by Playwright's
        # `expect`: each of its failed polls builds an accessibility snapshot of the page
        # on the page's main thread (measured, a third of a second per sign-in of a
        # loaded machine's main thread), so the timing slowed what it timed
        page.wait_for_function(shown, polling="raf", timeout=300_000)

    def in_page(page) -> float:  # type: ignore[no-untyped-def]
        return float(page.evaluate("window.__costgateDrawnAt - window.__costgateClickAt")) / 1000

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.add_init_script(_CLICK_CLOCK)
        page.goto(url)
        page.get_by_role("textbox", name="Name").fill(user)
        page.get_by_role("textbox", name="Password").fill(password)
        page.wait_for_timeout(typing_s * 1000)
        began = time.perf_counter()
        page.get_by_role("button", name="Sign in").click()
        # the Overview's tiles and its two charts (spend, savings: a seeded ledger's)
        settled(page, _drawn("[data-testid=stMetricValue]", charts=2))
        wall = time.perf_counter() - began
        # in the page: from the click event to the first frame drawn complete; the wall
        # clock adds Playwright's own steps before the click (scrolling the button into
        # view, waiting for it to be still and hit-testing it: 0.05-0.1 s measured)
        print(f"sign-in to drawn overview: {in_page(page):6.2f} s (wall clock {wall:.2f} s)")
        times: dict[str, list[float]] = {name: [] for name in browser_pages}
        walls: dict[str, list[float]] = {name: [] for name in browser_pages}
        for _ in range(repeat):
            for name in browser_pages:
                began = time.perf_counter()
                page.get_by_test_id("stSidebarNav").get_by_role("link", name=name).click()
                settled(page, _drawn(page=name))
                walls[name].append(time.perf_counter() - began)
                times[name].append(in_page(page))
        browser.close()
    for name, values in times.items():
        print(
            f"{name:16s} first visit {values[0]:5.2f} s, "
            f"median of {len(values)} {statistics.median(values):5.2f} s"
            f"  (wall clock {walls[name][0]:.2f} s)"
            + ("  (over 1 s)" if values[0] >= 1 else "")
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
