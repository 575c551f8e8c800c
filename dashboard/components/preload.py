"""Load the browser code of the first page's elements while the sign-in page is open.

Streamlit's frontend fetches and compiles an element's code the first time a page shows
one: Plotly's (a 4.7 MB module) when the first chart appears, then the metric, date and
multiselect widgets'. Measured, that was most of the time from "Sign in" to a drawn
Overview on a fresh browser (`gateway.devtools.render_timing`). The sign-in page
imports those modules in the background instead (`import()` of the very files
Streamlit's own lazy imports name, so that the browser's module map holds them when the
Overview asks), while the user types and the server checks the password; then, when the
browser is idle, the modules the other pages add.

Loading the code is not all: Plotly's first chart in a page also pays for setting up its
styles, fonts and axes code. So the sign-in page draws one small chart of no data,
hidden, while the user types (`warm_chart`). Measured on a young ledger on a quiet
machine (`gateway.devtools.render_timing --fresh-dashboard --typing-s 3`), sign-in to a
drawn Overview took 1.42 and 1.45 s with it, 1.94 and 1.60 s without.

Nor is warming the code all: Streamlit draws most elements through React.lazy, and the
first of a kind in a page suspends (a skeleton) even when its module is loaded, and
React then holds the content back while Plotly draws. The warm-up therefore also draws
one of each kind the first pages show. Measured against 10,000,000 seeded rows
(`render_timing --fresh-dashboard --typing-s 3`, the page counted as drawn only once its
charts are; docs/dashboard.md has the runs), sign-in to a drawn Overview took 1.01-1.26 s
before, 0.71-0.89 s after (13 runs); the Savings page's first visit 0.87-1.01 s before
its table was warmed too, 0.65-1.03 s after (two of the 13 over a second: its three
charts are the browser's longest step).

Nothing here touches data: the page after sign-in still runs its queries and draws its
own charts; only the browser's code is loaded and warmed.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import streamlit as st
import streamlit.components.v2 as components

# what the page after sign-in shows (the Overview, the sidebar), by element; the file
# names carry a content hash that changes with each Streamlit release, so they are
# looked up in the installed frontend (`chunk_files`)
FIRST_PAGE_ELEMENTS = (
    "PlotlyChart",
    "withFullScreenWrapper",
    "resolveDefaultExport",
    "Metric",
    "DateInput",
    "Multiselect",
    "Checkbox",
    "Button",
)
# what the other pages add (tables, number and choice inputs, the reconcile upload...):
# imported after the first page's, when the browser is idle, so as not to compete with
# drawing the Overview
OTHER_PAGE_ELEMENTS = (
    "DataFrame",
    "Selectbox",
    "NumberInput",
    "Radio",
    "Json",
    "FileUploader",
    "DownloadButton",
    "Spinner",
    # Markdown's emoji plugin, which StreamlitMarkdown imports on the first warning or
    # info box (the Routing page's without a running gateway: 0.3 s of its 1.1 s first
    # visit went to fetching it, measured in Chromium on a fresh dashboard)
    "remark-emoji",
)
STATIC_JS = Path(st.__file__).resolve().parent / "static" / "static" / "js"

_PRELOAD_JS = """
export default function (component) {
  const { data } = component;
  // resolved as Streamlit's own lazy imports are: next to its entry module
  const entry = document.querySelector('script[type="module"][src*="/static/js/index."]');
  if (!entry || !data || !Array.isArray(data.files)) return;
  // a failure only means the page loads the module itself, as it would anyway
  const load = (files) =>
    Promise.all(files.map((f) => import(new URL(f, entry.src).href).catch(() => {})));
  const idle = window.requestIdleCallback || ((callback) => setTimeout(callback, 500));
  load(data.files).then(() => idle(() => load(data.later || []), { timeout: 10000 }));
}
"""
_preloader = components.component("costgate_preload", js=_PRELOAD_JS)


def chunk_files(names: Iterable[str], directory: Path = STATIC_JS) -> list[str]:
    """The frontend's module files for `names` ("PlotlyChart" -> "PlotlyChart.D9Z0_fxz.js"),
    those found only (a Streamlit without one just loads it when needed), each once."""
    found: list[str] = []
    for name in names:
        for path in sorted(directory.glob(f"{name}.*.js")):
            # exactly <name>.<hash>.js: not PlotlyChartSomething.<hash>.js
            if path.name.count(".") == 2 and path.name not in found:
                found.append(path.name)
    return found


@st.cache_resource(show_spinner=False)
def _files() -> tuple[list[str], list[str]]:
    return chunk_files(FIRST_PAGE_ELEMENTS), chunk_files(OTHER_PAGE_ELEMENTS)


WARM_KEY = "costgate_warm_chart"
_WARM_DAY = dt.date(2026, 1, 1)  # any fixed day: the widget is never seen
WARM_LABEL = "warm"  # every warm-up element's label (tests tell them from the page's)
# out of the page's flow and invisible (not `display: none`, under which Plotly cannot
# measure, so would not draw); `visibility: hidden` keeps it out of the accessibility tree
# (every descendant too, `!important`: an element that sets its own visibility, as the
# metric's help button does, would otherwise stay in the tab order)
_WARM_CSS = (
    f"<style>.st-key-{WARM_KEY} {{position: fixed; left: 0; top: 0; width: 640px; "
    "visibility: hidden; pointer-events: none; z-index: -1} "
    f".st-key-{WARM_KEY} * {{visibility: hidden !important}}</style>"
)


@st.cache_resource(show_spinner=False)
def _warm_figure() -> Any:
    """One chart like the Overview's (a line and bars over a date axis), with no data:
    the same for every sign-in page, so built once per process."""
    import plotly.graph_objects as go

    x = ["2026-01-01", "2026-01-02"]
    fig = go.Figure([go.Scatter(x=x, y=[0, 0], mode="lines"), go.Bar(x=x, y=[0, 0])])
    fig.update_layout(height=200, margin=dict(l=10, r=10, t=10, b=10), showlegend=True)
    return fig


def warm_chart() -> None:
    """Draw `_warm_figure` and one of each lazily loaded element of the first page,
    hidden (see the module's docstring)."""
    st.html(_WARM_CSS)
    with st.container(key=WARM_KEY):
        st.plotly_chart(_warm_figure(), key=f"{WARM_KEY}_plot", config={"displayModeBar": False})
        # Streamlit's frontend renders these through React.lazy: the first one of a kind
        # in a page suspends (a skeleton) even when its module is loaded already, and
        # React then holds the content back while Plotly keeps the main thread busy.
        # Measured on the Overview after sign-in: 16 skeletons (8 metrics, the sidebar's
        # widgets) from 0.3 to 1.1 s after the click. Drawn once here, they do not suspend
        # again in this page's life; they are cleared with the sign-in page
        st.metric(WARM_LABEL, "0", "0", help=WARM_LABEL)
        st.date_input(WARM_LABEL, value=(_WARM_DAY, _WARM_DAY), key=f"{WARM_KEY}_date")
        st.multiselect(WARM_LABEL, [WARM_LABEL], key=f"{WARM_KEY}_pick")
        st.toggle(WARM_LABEL, key=f"{WARM_KEY}_toggle")
        st.button(WARM_LABEL, key=f"{WARM_KEY}_button")
        # and the other pages' table (Savings draws three: 0.3 s of skeletons measured on
        # its first visit) and choice box
        st.dataframe({WARM_LABEL: [0]}, key=f"{WARM_KEY}_table")
        st.selectbox(WARM_LABEL, [WARM_LABEL], key=f"{WARM_KEY}_choice")


def preload_first_page() -> None:
    """Render the (invisible) preloader: once drawn, it imports the first page's modules,
    then, when the browser is idle, the other pages'."""
    first, later = _files()
    if first or later:
        _preloader(data={"files": first, "later": later}, key="costgate_preload")
    warm_chart()
