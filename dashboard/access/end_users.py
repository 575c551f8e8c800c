"""Who may see which end user: the ids themselves, a pseudonym, or nothing (pure).

End-user ids are the gateway's customers' own customers: finance and admin see them as
recorded (to bill, to call); ops see a pseudonym (`pseudonym`: a short HMAC of the id
under the deployment's dashboard secret, so the same end user keeps one label across
pages and days, but the label says nothing about who it is and differs between
deployments); a viewer sees none. The frames a page shows go through `present` on the
server before anything is rendered, so no role's browser ever receives an id it may not
see, and a filter by end user is dropped on the server for the roles that may not use it.
"""

from __future__ import annotations

import enum
import hashlib
import hmac

import pandas as pd

PSEUDONYM_PREFIX = "user-"
PSEUDONYM_HEX = 12  # 48 bits: unique across 100,000s of end users, short on screen
HIDDEN = "(hidden)"


class IdView(enum.StrEnum):
    CLEAR = "clear"
    PSEUDONYM = "pseudonym"
    NONE = "none"


ROLE_VIEWS = {"admin": IdView.CLEAR, "finance": IdView.CLEAR, "ops": IdView.PSEUDONYM}


def view_for(role: str) -> IdView:
    """How `role` sees end-user ids; an unknown role sees none."""
    return ROLE_VIEWS.get(role, IdView.NONE)


def pseudonym(end_user: str, key: bytes) -> str:
    digest = hmac.new(key, b"end-user|" + end_user.encode("utf-8", "surrogatepass"), hashlib.sha256)
    return PSEUDONYM_PREFIX + digest.hexdigest()[:PSEUDONYM_HEX]


def shown_id(end_user: str | float | None, view: IdView, key: bytes) -> str | None:
    if end_user is None or end_user != end_user:  # None, or pandas' NaN for a missing one
        return None
    if view is IdView.CLEAR:
        return str(end_user)
    if view is IdView.PSEUDONYM:
        return pseudonym(str(end_user), key)
    return HIDDEN


def present(
    frame: pd.DataFrame, view: IdView, key: bytes, column: str = "end_user"
) -> pd.DataFrame:
    """`frame` with its end-user column as `view` allows (a copy; CLEAR: as it is)."""
    if view is IdView.CLEAR or column not in frame:
        return frame
    out = frame.copy()
    shown = [shown_id(v, view, key) for v in out[column]]
    out[column] = pd.Series(shown, index=out.index, dtype=object)
    return out
