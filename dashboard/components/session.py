"""Sign-in: who is using this browser session, and what they may do.

Every script run re-checks the user on the server (`dashboard.access.guard.refresh`):
the session must still be open and the user still configured, with the role and team
read from the configuration. A reload starts a new Streamlit session, which the signed
cookie (`dashboard.access.sessions`) signs back in. Failed sign-ins are throttled per
name and per client address, in this process (`dashboard.access.throttle`).

Streamlit reads cookies (`st.context.cookies`, as sent when the page opened) but cannot
set them, so a small inline component writes them with `document.cookie`: the cookie
is therefore not HttpOnly. It is SameSite=Strict, Secure over https, expires, and is
worth nothing once its server-side session is closed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import streamlit as st
import streamlit.components.v2 as components

from dashboard.access.guard import refresh
from dashboard.access.sessions import (
    COOKIE_NAME,
    SessionConfigError,
    SessionStore,
    SessionUser,
)
from dashboard.access.throttle import SignInThrottle, address_key
from dashboard.auth import (
    USERS_ENV,
    USERS_FILE_ENV,
    AuthConfigError,
    User,
    authenticate,
    load_users,
)
from dashboard.components.preload import preload_first_page

__all__ = [
    "COOKIE_PENDING_KEY",
    "USER_KEY",
    "SessionUser",
    "current_user",
    "require_user",
    "sign_out",
]

USER_KEY = "costgate_user"
COOKIE_PENDING_KEY = "costgate_cookie_pending"  # a cookie the browser has yet to store
_DROPPED_KEY = "costgate_cookie_dropped"  # a stale cookie already cleared (no loop)
_WRITER_KEY = "costgate_cookie_writer"
_CLEAR = f"{COOKIE_NAME}=; Path=/; Max-Age=0; SameSite=Strict"

_COOKIE_JS = """
export default function (component) {
  const { data, setTriggerValue } = component;
  // Secure over https only: a plain-http dashboard on 127.0.0.1 must keep it too
  const secure = window.location.protocol === "https:" ? "; Secure" : "";
  document.cookie = data.cookie + secure;
  setTriggerValue("written", data.cookie);
}
"""
_cookie_writer = components.component("costgate_cookie", js=_COOKIE_JS)


@st.cache_resource(show_spinner=False)
def session_store() -> SessionStore:
    return SessionStore.from_environment()


@st.cache_resource(show_spinner=False)
def sign_in_throttle() -> SignInThrottle:
    # one per dashboard process, shared by its sessions (docs/dashboard.md says so)
    return SignInThrottle()


def current_user() -> SessionUser | None:
    """What this session remembers; `checked_user` is what the server says now."""
    return st.session_state.get(USER_KEY)


def _recheck(
    known: SessionUser, users: Mapping[str, User], store: SessionStore
) -> SessionUser | None:
    """The remembered user as the server sees them now, remembered in turn; None (and
    signed out) if the session has ended or the user is gone."""
    fresh = refresh(known, users, store)
    if fresh is None:
        st.session_state.pop(USER_KEY, None)
        st.session_state[COOKIE_PENDING_KEY] = _CLEAR
        return None
    st.session_state[USER_KEY] = fresh
    return fresh


def checked_user() -> SessionUser | None:
    """The signed-in user, checked on the server now (pages call it: a page may run
    without the app script, as AppTest reruns do); None if not signed in any more."""
    known = current_user()
    if known is None:
        return None
    try:
        users, store = load_users(), session_store()
    except (AuthConfigError, SessionConfigError):
        return None
    return _recheck(known, users, store)


def _set_cookie(value: str, max_age_s: int) -> None:
    st.session_state[COOKIE_PENDING_KEY] = (
        f"{COOKIE_NAME}={value}; Path=/; Max-Age={max_age_s}; SameSite=Strict"
    )


@st.fragment
def _write_pending_cookie() -> None:
    """Have the browser store (or clear) the pending cookie; rendered until it reports
    that it did, since a run can end before the browser has drawn it.

    A fragment: the browser's report reruns only this, queued behind the run in
    progress, where a report from outside a fragment would interrupt that run (the first
    page after sign-in) and start the whole script again."""
    pending = st.session_state.get(COOKIE_PENDING_KEY)
    if not pending:
        return

    def written() -> None:
        state = st.session_state.get(_WRITER_KEY) or {}
        if state.get("written") == st.session_state.get(COOKIE_PENDING_KEY):
            st.session_state.pop(COOKIE_PENDING_KEY, None)

    _cookie_writer(data={"cookie": pending}, key=_WRITER_KEY, on_written_change=written)


def sign_out() -> None:
    """End the session on the server (its cookie is void everywhere) and clear the cookie."""
    user = current_user()
    if user is not None:
        session_store().close(user.session_id)
    st.session_state.pop(USER_KEY, None)
    st.session_state[COOKIE_PENDING_KEY] = _CLEAR


def _from_cookie(users: Mapping[str, User], store: SessionStore) -> SessionUser | None:
    raw = st.context.cookies.get(COOKIE_NAME)
    if not raw or raw == st.session_state.get(_DROPPED_KEY):
        return None
    resolved = store.resolve(raw)
    found = None
    if resolved is not None:
        name, session_id = resolved
        found = refresh(SessionUser(name, "", None, session_id), users, store)
    if found is None:  # forged, expired or signed out: drop it from the browser, once
        st.session_state[_DROPPED_KEY] = raw
        st.session_state[COOKIE_PENDING_KEY] = _CLEAR
    return found


def require_user() -> SessionUser:
    """The signed-in user, checked now; otherwise render the sign-in form and stop this run."""
    try:
        users = load_users()
        store = session_store()
    except (AuthConfigError, SessionConfigError) as err:
        st.error(f"The dashboard's sign-in cannot be used: {err}")
        st.stop()
    known = current_user()
    if known is not None:
        fresh = _recheck(known, users, store)
    else:
        fresh = _from_cookie(users, store)
        if fresh is not None:
            st.session_state[USER_KEY] = fresh
    # after the checks, which may have ended a session and queued its cookie's removal
    _write_pending_cookie()
    if fresh is not None:
        return fresh
    # a session remembered here that the server no longer honours: signed out elsewhere,
    # expired, or the user is no longer configured
    _sign_in_form(users, store, ended=known is not None)
    raise AssertionError("unreachable")  # the form stops the run


def _sign_in_form(users: Mapping[str, User], store: SessionStore, ended: bool) -> None:
    st.title("costgate")
    if not users:
        st.warning(
            "No dashboard users are configured, so nobody can sign in.\n\n"
            f'Set `{USERS_ENV}="alice:ops:<hash>,bob:finance:<hash>"` (or name a file of '
            f"`name:role:hash` lines in `{USERS_FILE_ENV}`), with hashes from "
            "`costgate dashboard hash-password`, and restart. `costgate dashboard` without "
            "users creates a one-time `admin` password and prints it."
        )
        st.stop()
    if ended:
        st.info("Your session has ended; sign in again.")
    with st.form("sign_in"):
        st.subheader("Sign in")
        name = st.text_input("Name", key="sign_in_name")
        password = st.text_input("Password", type="password", key="sign_in_password")
        submitted = st.form_submit_button("Sign in", type="primary")
    # the browser loads the next page's charts and widgets while the user types
    preload_first_page()
    if submitted:
        throttle = sign_in_throttle()
        address = address_key(st.context.ip_address)
        wait = throttle.wait_s(name, address)
        if wait > 0:  # refused before the password is looked at
            st.error(f"Too many failed sign-ins: try again in {math.ceil(wait)} s.")
            st.stop()
        found = authenticate(users, name, password)
        if found is None:
            throttle.failed(name, address)
            wait = throttle.wait_s(name, address)
            later = f" Too many failures: the next try waits {math.ceil(wait)} s." if wait else ""
            st.error(f"Wrong name or password.{later}")
            st.stop()
        throttle.succeeded(name, address)
        try:
            opened = store.open(found.name)
        except SessionConfigError as err:
            st.error(f"Signed in, but the session cannot be kept: {err}")
            st.stop()
        st.session_state[USER_KEY] = SessionUser(
            found.name, found.role, found.team, opened.session_id
        )
        st.session_state.pop(_DROPPED_KEY, None)
        _set_cookie(opened.cookie, opened.max_age_s)
        st.rerun()
    st.stop()
