"""The dashboard's entry point (`costgate dashboard` runs it): sign-in, then routing.

Pages live in dashboard/pages/, one file each, and share the sidebar rendered here. The
sidebar lists the pages the signed-in role may open; the others stay registered but
hidden, so that opening one by its URL runs the page's own refusal
(`components.page.start_page`) instead of silently showing another page.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from dashboard import prewarm
from dashboard.components import session, sidebar
from dashboard.components.page import PAGES as PAGE_SPECS
from dashboard.components.page import ledger_errors_reported
from dashboard.settings import load_settings

PAGES = Path(__file__).resolve().parent / "pages"

st.set_page_config(page_title="costgate", page_icon=":material/paid:", layout="wide")
settings = load_settings()
# imports, connections and the default view's queries, while the user signs in
prewarm.start(settings.database_url)
user = session.require_user()
allowed = [spec for spec in PAGE_SPECS if user.can(spec.needs)]
sections: dict[str, list[st.Page]] = {}
for spec in PAGE_SPECS:
    sections.setdefault(spec.section, []).append(
        st.Page(
            PAGES / f"{spec.file}.py",
            title=spec.title,
            icon=spec.icon,
            default=spec is allowed[0],  # every role may open at least one page
            visibility="visible" if spec in allowed else "hidden",
        )
    )
navigation = st.navigation(sections)
with ledger_errors_reported():  # the ledger down or never migrated: said, not a traceback
    sidebar.render(user, settings.database_url)
    navigation.run()
