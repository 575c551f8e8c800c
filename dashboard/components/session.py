"""Sign-in: who is using this browser session, and what they may do."""

from __future__ import annotations

import dataclasses

import streamlit as st

from dashboard.auth import USERS_ENV, USERS_FILE_ENV, AuthConfigError, authenticate, load_users

USER_KEY = "costgate_user"


@dataclasses.dataclass(frozen=True)
class SessionUser:
    name: str
    role: str

    @property
    def can_edit_routing(self) -> bool:
        return self.role == "ops"


def current_user() -> SessionUser | None:
    return st.session_state.get(USER_KEY)


def sign_out() -> None:
    st.session_state.pop(USER_KEY, None)


def require_user() -> SessionUser:
    """The signed-in user; otherwise render the sign-in form and stop this run."""
    user = current_user()
    if user is not None:
        return user
    st.title("costgate")
    try:
        users = load_users()
    except AuthConfigError as err:
        st.error(f"The dashboard's user list cannot be used: {err}")
        st.stop()
    if not users:
        st.warning(
            "No dashboard users are configured, so nobody can sign in.\n\n"
            f'Set `{USERS_ENV}="alice:ops:<hash>,bob:viewer:<hash>"` (or name a file of '
            f"`name:role:hash` lines in `{USERS_FILE_ENV}`), with hashes from "
            "`costgate dashboard hash-password`, and restart. `costgate dashboard` without "
            "users creates a one-time `admin` password and prints it."
        )
        st.stop()
    with st.form("sign_in"):
        st.subheader("Sign in")
        name = st.text_input("Name", key="sign_in_name")
        password = st.text_input("Password", type="password", key="sign_in_password")
        submitted = st.form_submit_button("Sign in", type="primary")
    if submitted:
        found = authenticate(users, name, password)
        if found is None:
            st.error("Wrong name or password.")
        else:
            st.session_state[USER_KEY] = SessionUser(found.name, found.role)
            st.rerun()
    st.stop()
    raise AssertionError("unreachable")  # st.stop() raises
