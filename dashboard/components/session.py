"""Sign-in: who is using this browser session, and what they may do.

Every script run re-checks the user on the server (`dashboard.access.guard.refresh`):
the session must still be open and the user still configured, with the role and team
read from the configuration. A reload starts a new Streamlit session, which the signed
cookie (`dashboard.access.sessions`) signs back in. Failed sign-ins are throttled per
name from a client and per client (the address behind trusted proxies), in this process
(`dashboard.access.throttle`).

Streamlit reads cookies (`st.context.cookies`, as sent when the page opened) but cannot
set them over its websocket. The server does, in a real `Set-Cookie` from a route beside
Streamlit (`dashboard.access.cookie_handoff`): a small inline component POSTs a one-time
token there, so the cookie is HttpOnly (no page script reads it), SameSite=Strict,
Secure over https, expires, and is worth nothing once its server-side session is closed.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping

import streamlit as st
import streamlit.components.v2 as components

from dashboard.access.cookie_handoff import (
    CLEARED_LINE,
    HANDOFF,
    ROUTE,
    session_cookie_line,
)
from dashboard.access.guard import refresh
from dashboard.access.sessions import (
    COOKIE_NAME,
    SessionConfigError,
    SessionStore,
    SessionUser,
)
from dashboard.access.throttle import (
    Networks,
    SignInThrottle,
    address_key,
    client_address,
    trusted_networks,
)
from dashboard.auth import (
    USERS_ENV,
    USERS_FILE_ENV,
    AuthConfigError,
    User,
    authenticate,
    load_users,
)
from dashboard.components.preload import preload_first_page
from gateway.domain.environment import environment

log = logging.getLogger("costgate.dashboard")

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
_TOKEN_KEY = "costgate_cookie_token"  # (pending line, its one-time token)
_CLEAR = CLEARED_LINE

# the route answers with the Set-Cookie (HttpOnly: this script never sees the cookie);
# done once the browser has its answer, whatever it was (a reused token: a 404)
# the route answers with the Set-Cookie (HttpOnly: this script never sees the cookie).
# No report back to the script: a report reran the writer as a fragment, and a fragment
# run queued behind the first page's full run emptied that page in the browser (Streamlit
# 1.67, seen under load); the script asks the handoff whether the token was taken instead
_COOKIE_JS = """
export default function (component) {
  const { data } = component;
  fetch(data.route, {method: "POST", body: data.token, credentials: "same-origin",
                     cache: "no-store"}).catch(() => {});
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


@st.cache_resource(show_spinner=False)
def trusted_proxies() -> Networks:
    try:
        return trusted_networks(environment().dashboard_trusted_proxies)
    except ValueError as err:
        # none trusted: every connection is its own client, never a forged one
        log.warning("COSTGATE_DASHBOARD_TRUSTED_PROXIES ignored: %s", err)
        return ()


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
    st.session_state[COOKIE_PENDING_KEY] = session_cookie_line(value, max_age_s)


def _write_pending_cookie() -> None:
    """Have the browser store (or clear) the pending cookie: the writer is drawn on every
    run until its page has fetched the line (a run can end before the browser drew it),
    with a new token when the last one expired unfetched."""
    pending = st.session_state.get(COOKIE_PENDING_KEY)
    if not pending:
        return
    offered = st.session_state.get(_TOKEN_KEY)
    state = "gone" if offered is None or offered[0] != pending else HANDOFF.state(offered[1])
    if state == "taken":
        st.session_state.pop(COOKIE_PENDING_KEY, None)
        st.session_state.pop(_TOKEN_KEY, None)
        return
    if offered is None or state == "gone":  # one token per line, not per run
        offered = (pending, HANDOFF.offer(pending))
        st.session_state[_TOKEN_KEY] = offered
    _cookie_writer(data={"route": ROUTE, "token": offered[1]}, key=_WRITER_KEY)


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
        address = address_key(client_address(st.context.ip_address,
                                             st.context.headers.get("x-forwarded-for"),
                                             trusted_proxies()))  # fmt: skip
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
            opened = store.open(found.name, found.password_hash)
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
