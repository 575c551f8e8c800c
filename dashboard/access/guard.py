"""The server's check behind every page and action: who is signed in, and may they.

What a browser session remembers about its user (`SessionUser`, in Streamlit's session
state) is never taken on trust: each check asks the session store whether the session
is still open, and reads the user's role and team from the configured users, so a
revoked session, a removed user, a changed password or a changed role takes effect on the
next click, and a
session state altered to claim another role gains nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

from dashboard.access.sessions import SessionStore, SessionUser
from dashboard.auth import Permission, User, load_users

WHAT = {
    Permission.SPEND: "see spend and savings",
    Permission.EXPORT: "export the ledger",
    Permission.LATENCY: "see latency and errors",
    Permission.REQUESTS: "see the request log",
    Permission.ROUTING_VIEW: "see routing",
    Permission.ROUTING_EDIT: "change routing",
    Permission.BUDGETS_VIEW: "see budgets",
    Permission.BUDGETS_EDIT: "change budgets",
    Permission.CUSTOMERS: "see spend per end user",
}


class PermissionDenied(Exception):
    """Refused; the message says why, for the person refused."""


def refresh(
    user: SessionUser, users: Mapping[str, User], store: SessionStore
) -> SessionUser | None:
    """`user` as configured now, if the session is still open, the user still exists and
    their password is the one the session was opened with."""
    configured = users.get(user.name)
    if configured is None:
        return None
    if not store.is_live(user.session_id, user.name, credential=configured.password_hash):
        return None
    return SessionUser(configured.name, configured.role, configured.team, user.session_id)


def authorize(
    user: SessionUser,
    permission: Permission,
    *,
    all_teams: bool = False,
    users: Mapping[str, User] | None = None,
    store: SessionStore | None = None,
) -> SessionUser:
    """`user` as configured now, if they may do `permission`; else PermissionDenied.

    `all_teams`: the action affects every team (routing), so a team-scoped user may not.
    """
    store = store or SessionStore.from_environment()
    fresh = refresh(user, load_users() if users is None else users, store)
    if fresh is None:
        raise PermissionDenied("not signed in (the session has ended): sign in again")
    if not fresh.can(permission):
        raise PermissionDenied(f"{fresh.name} ({fresh.role}) may not {WHAT[permission]}")
    if all_teams and fresh.team is not None:
        raise PermissionDenied(
            f"{fresh.name} sees only team {fresh.team}, and this would affect every team"
        )
    return fresh
