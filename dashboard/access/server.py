"""The dashboard's server: Streamlit's app (`dashboard/app.py`) with one route of ours
beside it, the one that sets the session cookie (`dashboard.access.cookie_handoff`).

`costgate dashboard` runs `streamlit run` on this file; Streamlit finds `app` below and
serves it (`st.App`, Streamlit's own way to add routes).
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st
from starlette.routing import Route

from dashboard.access.cookie_handoff import ROUTE, session_route

SCRIPT = Path(__file__).resolve().parents[1] / "app.py"

app = st.App(str(SCRIPT), routes=[Route(ROUTE, session_route, methods=["POST"])])
