"""Time every page's render against the configured ledger (`python -m dashboard.render_timing`).

Renders each page with Streamlit's AppTest (the script run, SQL and pandas included; the
browser's drawing excluded), as a signed-in viewer with the default filters (the last 30
days against the 30 before). It reports the first run of a fresh process, which builds
the daily rollup (in a real session that starts while the user signs in), then each page
with the query cache emptied, then each page again with it warm.
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

APP = Path(__file__).resolve().parent / "app.py"
PAGES = ("overview", "savings", "spend", "export", "latency_errors", "routing", "requests")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per page; the median is shown")
    args = parser.parse_args(argv)

    import statistics

    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from dashboard.components.session import USER_KEY, SessionUser

    logging.disable(logging.WARNING)  # "No runtime found" and the like, once per query

    at = AppTest.from_file(str(APP), default_timeout=600)
    at.session_state[USER_KEY] = SessionUser("timing", "viewer")
    began = time.perf_counter()
    at.run()
    print(f"first run in a fresh process (imports + rollup): {time.perf_counter() - began:6.2f} s")
    print(f"{'page':16s} {'query cache empty':>18s} {'query cache warm':>17s}")
    failed = False
    for page in PAGES:
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
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
