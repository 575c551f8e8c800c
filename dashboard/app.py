"""The dashboard's entry point (`costgate dashboard` runs it): sign-in, then routing.

Pages live in dashboard/pages/, one file each, and share the sidebar rendered here.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st
from sqlalchemy.exc import OperationalError

from dashboard import queries
from dashboard.components import session, sidebar
from dashboard.settings import load_settings

PAGES = Path(__file__).resolve().parent / "pages"

st.set_page_config(page_title="costgate", page_icon=":material/paid:", layout="wide")
settings = load_settings()
# the default views' daily rollup builds in the background while the user signs in
queries.warm_rollup(settings.database_url)
user = session.require_user()
navigation = st.navigation(
    {
        "Finance": [
            st.Page(
                PAGES / "overview.py", title="Overview", icon=":material/dashboard:", default=True
            ),
            st.Page(PAGES / "savings.py", title="Savings", icon=":material/savings:"),
            st.Page(PAGES / "spend.py", title="Spend", icon=":material/receipt_long:"),
            st.Page(PAGES / "export.py", title="Export", icon=":material/download:"),
        ],
        "Ops": [
            st.Page(PAGES / "latency_errors.py", title="Latency & errors", icon=":material/speed:"),
            st.Page(PAGES / "routing.py", title="Routing", icon=":material/alt_route:"),
            st.Page(PAGES / "requests.py", title="Requests", icon=":material/list:"),
        ],
    }
)
try:
    sidebar.render(user, settings.database_url)
    navigation.run()
except OperationalError as err:  # the ledger is down or unreachable: say so, not a traceback
    st.error(
        "The ledger database cannot be reached "
        f"({type(err.orig).__name__ if err.orig else 'OperationalError'}). Check DATABASE_URL "
        "and that PostgreSQL is running; this page retries on the next refresh."
    )
