"""The session cookie, set by the server in a real `Set-Cookie`: HttpOnly, SameSite=Strict,
Secure behind https.

Streamlit talks to the page over a websocket, which cannot set a cookie, and a cookie
that page script writes (`document.cookie`) is one page script can read, on any port of
the same host (the Ray dashboard, Grafana). So a sign-in hands the cookie over through a
one-time token instead: the script run files the cookie's `Set-Cookie` line under a
random token (`HANDOFF.offer`, one use, `HANDOFF_TTL_S`), the page POSTs that token to
`ROUTE` on its own origin, and the route (`session_route`, served beside Streamlit by
`dashboard.access.server`) answers with the line as its `Set-Cookie` header. A token is
worth one cookie, once, for a minute, and only the dashboard's own page sees it.

Secure is added when the request came over https, as the server saw it or as the TLS
proxy in front says (`X-Forwarded-Proto`): a client that lies about it only keeps its
own cookie from being sent over plain http.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from starlette.requests import Request
from starlette.responses import Response

from dashboard.access.sessions import COOKIE_NAME

ROUTE = "/costgate/session"
HANDOFF_TTL_S = 60.0
MAX_PENDING = 10_000  # memory bound: sign-ins waiting for their page's POST
_ATTRIBUTES = "Path=/; HttpOnly; SameSite=Strict"


def session_cookie_line(value: str, max_age_s: int) -> str:
    return f"{COOKIE_NAME}={value}; Max-Age={max_age_s}; {_ATTRIBUTES}"


CLEARED_LINE = f"{COOKIE_NAME}=; Max-Age=0; {_ATTRIBUTES}"


class CookieHandoff:
    """`Set-Cookie` lines waiting for their page to fetch them, by one-time token."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._pending: dict[str, tuple[float, str]] = {}
        # tokens whose page fetched their line (the script run stops offering it then)
        self._taken: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()  # script runs are threads; the route the event loop

    def offer(self, line: str) -> str:
        token = secrets.token_urlsafe(32)
        now = self._clock()
        with self._lock:
            for old in [t for t, (until, _) in self._pending.items() if until <= now]:
                del self._pending[old]
            while len(self._pending) >= MAX_PENDING:
                del self._pending[next(iter(self._pending))]
            self._pending[token] = (now + HANDOFF_TTL_S, line)
        return token

    def take(self, token: str) -> str | None:
        """The line filed under `token`, once, while it is fresh."""
        with self._lock:
            found = self._pending.pop(token, None)
            if found is None or found[0] <= self._clock():
                return None
            self._taken[token] = None
            while len(self._taken) > MAX_PENDING:
                del self._taken[next(iter(self._taken))]
        return found[1]

    def state(self, token: str) -> str:
        """`waiting` for its page's POST, `taken` by it, or `gone` (expired, unknown)."""
        with self._lock:
            if token in self._taken:
                return "taken"
            found = self._pending.get(token)
            return "waiting" if found is not None and found[0] > self._clock() else "gone"


HANDOFF = CookieHandoff()


def _https(request: Request) -> bool:
    forwarded = request.headers.get("x-forwarded-proto", "").split(",")[0].strip().lower()
    return request.url.scheme == "https" or forwarded == "https"


async def session_route(request: Request) -> Response:
    """POST the token; 204 with the cookie, or 404 for a token that is unknown, used or old."""
    body = await request.body()
    line = HANDOFF.take(body[:100].decode("ascii", errors="replace").strip())
    if line is None:
        return Response(status_code=404, headers={"cache-control": "no-store"})
    if _https(request):
        line += "; Secure"
    return Response(status_code=204, headers={"set-cookie": line, "cache-control": "no-store"})
