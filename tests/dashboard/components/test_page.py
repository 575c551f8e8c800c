"""A page body that loses the ledger says so on the page, in its own fragment's runs too
(the auto-refresh timer reruns the body alone, outside app.py's error handling)."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest


def _page_script() -> None:
    import types

    import psycopg
    import streamlit as st
    from sqlalchemy.exc import OperationalError, ProgrammingError

    from dashboard.components.page import refreshing

    def body() -> None:
        state = st.session_state.get("ledger", "down")
        if state == "down":
            raise OperationalError("SELECT 1", {}, ConnectionRefusedError("refused"))
        if state == "bare":
            raise ProgrammingError("SELECT 1", {}, psycopg.errors.UndefinedTable("no table"))
        if state == "bad sql":
            raise ProgrammingError("SELEC 1", {}, psycopg.errors.SyntaxError("syntax"))
        st.write("ledger back")

    refreshing(body, types.SimpleNamespace(refresh_s=None))  # type: ignore[arg-type]


def test_an_unreachable_then_unmigrated_ledger_is_said_and_the_next_run_retries() -> None:
    at = AppTest.from_function(_page_script).run()
    assert not at.exception
    assert "ledger database cannot be reached (ConnectionRefusedError)" in at.error[0].value

    at.session_state["ledger"] = "bare"
    at.run()
    assert not at.exception
    assert "no costgate tables yet" in at.error[0].value

    at.session_state["ledger"] = "up"
    at.run()
    assert not at.error and not at.exception
    assert at.markdown[0].value == "ledger back"


def test_any_other_sql_error_is_a_bug_and_shown_as_one() -> None:
    at = AppTest.from_function(_page_script)
    at.session_state["ledger"] = "bad sql"
    at.run()
    assert at.exception and not at.error
