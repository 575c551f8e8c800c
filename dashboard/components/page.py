"""What every page starts with: the role check, its title, the period in UTC, the empty state.

`PAGES` says which permission each page needs: `app.py` lists in the sidebar only the
pages the signed-in role may open, and `start_page` refuses the others on the server,
so a page opened by its URL checks the role too.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator

import streamlit as st
from sqlalchemy.exc import OperationalError, ProgrammingError

from dashboard import queries
from dashboard.auth import Permission
from dashboard.components.session import SessionUser, checked_user
from dashboard.components.sidebar import FILTERS_KEY
from dashboard.filters import CUBE_FILTERS, Filters, ignored_note
from dashboard.settings import DashboardSettings, load_settings


@dataclasses.dataclass(frozen=True)
class PageSpec:
    file: str  # dashboard/pages/<file>.py
    title: str
    icon: str
    section: str
    needs: Permission
    # the page says itself which filters each of its views applies (end user, tag);
    # otherwise start_page says that those filters do not apply to the page
    own_filter_notes: bool = False


PAGES = (
    PageSpec("overview", "Overview", ":material/dashboard:", "Finance", Permission.SPEND),
    PageSpec("savings", "Savings", ":material/savings:", "Finance", Permission.SPEND),
    PageSpec("spend", "Spend", ":material/receipt_long:", "Finance", Permission.SPEND, True),
    PageSpec(
        "customers", "Customers", ":material/groups:", "Finance", Permission.CUSTOMERS, True
    ),
    PageSpec("export", "Export", ":material/download:", "Finance", Permission.EXPORT),
    # re-pricing and invoice checks: finance's tools, with the export's permission
    PageSpec("whatif", "What-if", ":material/calculate:", "Finance", Permission.EXPORT),
    PageSpec("reconcile", "Reconcile", ":material/fact_check:", "Finance", Permission.EXPORT),
    # A/B tests of routing mixes: cost beside quality, so the spend permission
    PageSpec("experiments", "Experiments", ":material/science:", "Finance", Permission.SPEND),
    PageSpec("latency_errors", "Latency & errors", ":material/speed:", "Ops", Permission.LATENCY),
    PageSpec("routing", "Routing", ":material/alt_route:", "Ops", Permission.ROUTING_VIEW),
    PageSpec("requests", "Requests", ":material/list:", "Ops", Permission.REQUESTS),
    # last: every role may read it, and a role lands on its first page
    PageSpec(
        "budgets",
        "Budgets",
        ":material/account_balance_wallet:",
        "Controls",
        Permission.BUDGETS_VIEW,
    ),
)
_BY_TITLE = {page.title: page for page in PAGES}

EMPTY_LEDGER = (
    "**No requests recorded yet.** Start the demo with `make demo` (or `costgate demo`): "
    "it runs the gateway, the simulated providers and demo traffic, and this page fills "
    "in within a minute. To explore realistic history instead, run "
    "`costgate seed --rows 100000`."
)


@dataclasses.dataclass(frozen=True)
class PageContext:
    settings: DashboardSettings
    filters: Filters
    user: SessionUser

    @property
    def url(self) -> str:
        """Where the page reads the ledger: the read replica if one is set."""
        return self.settings.read_url or self.settings.database_url

    @property
    def primary_url(self) -> str:
        """Where a page writes (budgets, invoices) and reads what it just wrote."""
        return self.settings.database_url


def start_page(title: str, with_period: bool = True) -> PageContext:
    """The page's context; a role that may not see the page gets a refusal and the run
    stops. The session is checked again here, on the server, not taken from app.py."""
    user = checked_user()
    if user is None:  # signed out, or a page file run on its own, outside app.py
        st.stop()
    if not user.can(_BY_TITLE[title].needs):
        st.title(title)
        st.error(f"{title} is not available to {user.name} ({user.role}).")
        st.stop()
    # the user's team, from the server's check, scopes every query the page makes
    filters = dataclasses.replace(st.session_state[FILTERS_KEY], team_scope=user.team)
    ctx = PageContext(load_settings(), filters, user)
    st.title(title)
    if with_period:
        st.caption(f"Period: {ctx.filters.label()} · all times UTC")
    if ctx.settings.reads_replica:
        st.caption(replica_note(queries.data_lag(ctx.url)))
    # the ledger-wide rollups keep no end user or tag: said, not silently ignored
    note = ignored_note(filters, CUBE_FILTERS, "this page")
    if note and not _BY_TITLE[title].own_filter_notes:
        st.info(note)
    return ctx


def replica_note(lag_s: float | None) -> str:
    """What a page says about its data when it reads a streaming replica."""
    if lag_s is None:
        return "Data from the primary database."
    if lag_s < 1:
        return "Data from a read replica, up to date."
    return f"Data from a read replica, {lag_s:,.0f} s behind the primary."


def ledger_is_empty(ctx: PageContext) -> bool:
    """Render the new user's empty state when the ledger has no rows at all."""
    if queries.ledger_is_empty(ctx.url):
        st.info(EMPTY_LEDGER)
        return True
    return False


def no_match() -> None:
    st.info(
        "No requests match these filters in this period. Widen the date range or clear filters."
    )


@contextlib.contextmanager
def ledger_errors_reported() -> Iterator[None]:
    """A ledger that cannot be reached, or was never migrated, said plainly on the page
    and retried on the next run, not shown as a traceback."""
    try:
        yield
    except OperationalError as err:
        st.error(
            "The ledger database cannot be reached "
            f"({type(err.orig).__name__ if err.orig else 'OperationalError'}). Check "
            "DATABASE_URL and that PostgreSQL is running; this page retries on the next "
            "refresh."
        )
    except ProgrammingError as err:
        # 42P01 undefined_table: a database nobody has migrated yet (a new DATABASE_URL,
        # an embedded server of its own), not a bug to show as a traceback
        if getattr(err.orig, "sqlstate", None) != "42P01":
            raise
        st.error(
            "The ledger database has no costgate tables yet. Run `costgate migrate` with "
            "the same DATABASE_URL; this page retries on the next refresh."
        )


def refreshing(body: Callable[[], None], settings: DashboardSettings) -> None:
    """Run a page body, re-run on a timer while auto-refresh is on. The timer's reruns
    run the body alone, outside app.py's run and its error handling: it has its own."""
    every = settings.refresh_s if st.session_state.get("auto_refresh", True) else None

    def guarded() -> None:
        with ledger_errors_reported():
            body()

    st.fragment(guarded, run_every=every)()
