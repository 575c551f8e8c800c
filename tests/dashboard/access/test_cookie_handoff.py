"""The route that sets the session cookie: one token, one cookie, HttpOnly, SameSite=Strict,
Secure when the request came over https."""

from __future__ import annotations

import httpx
from starlette.applications import Starlette
from starlette.routing import Route

from dashboard.access.cookie_handoff import (
    HANDOFF,
    HANDOFF_TTL_S,
    ROUTE,
    CookieHandoff,
    session_cookie_line,
    session_route,
)

APP = Starlette(routes=[Route(ROUTE, session_route, methods=["POST"])])


async def post(token: str, base: str = "http://dash", **headers: str) -> httpx.Response:
    transport = httpx.ASGITransport(app=APP)
    async with httpx.AsyncClient(transport=transport, base_url=base) as client:
        return await client.post(ROUTE, content=token, headers=headers)


async def test_a_token_sets_the_cookie_once_httponly_and_strict() -> None:
    token = HANDOFF.offer(session_cookie_line("v1.abc", 3600))
    first = await post(token)
    assert first.status_code == 204
    cookie = first.headers["set-cookie"]
    assert cookie.startswith("costgate_session=v1.abc;")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Max-Age=3600" in cookie
    assert "Secure" not in cookie  # plain http: a Secure cookie would never come back
    again = await post(token)
    assert again.status_code == 404 and "set-cookie" not in again.headers
    assert (await post("made-up")).status_code == 404


async def test_behind_https_the_cookie_is_secure() -> None:
    for base, headers in (("https://dash", {}), ("http://dash", {"x-forwarded-proto": "https"})):
        token = HANDOFF.offer(session_cookie_line("v1.abc", 60))
        resp = await post(token, base, **headers)
        assert resp.status_code == 204 and resp.headers["set-cookie"].endswith("; Secure")


def test_a_token_is_good_for_a_minute() -> None:
    now = [1000.0]
    handoff = CookieHandoff(clock=lambda: now[0])
    token = handoff.offer("line")
    now[0] += HANDOFF_TTL_S + 1
    assert handoff.take(token) is None
    assert handoff.take(handoff.offer("line")) == "line"


def test_a_tokens_state_is_waiting_then_taken_or_gone() -> None:
    now = [1000.0]
    handoff = CookieHandoff(clock=lambda: now[0])
    fetched, unfetched = handoff.offer("a=1"), handoff.offer("b=2")
    assert handoff.state(fetched) == handoff.state(unfetched) == "waiting"
    assert handoff.take(fetched) == "a=1"
    assert handoff.state(fetched) == "taken"  # the script run stops drawing its writer
    now[0] += HANDOFF_TTL_S + 1
    assert handoff.state(unfetched) == "gone"  # the run offers a new token
    assert handoff.take(unfetched) is None and handoff.state(unfetched) == "gone"
    assert handoff.state("made-up") == "gone"
