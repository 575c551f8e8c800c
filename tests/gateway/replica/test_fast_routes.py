"""The fast path for the API routes answers exactly as FastAPI's own routes did."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import Response

from gateway.domain.openai_errors import OpenAIError
from gateway.replica.http_api import FastRoutes, build_app
from tests.gateway.replica.test_service import Harness, completion, provider_keys  # noqa: F401

# the provider keys the Harness's config names (a fixture of test_service)
pytestmark = pytest.mark.usefixtures("provider_keys")


def _comparable(response: httpx.Response) -> tuple[int, Any, list[str]]:
    body = response.json()
    if isinstance(body, dict):
        body.pop("id", None)
    names = sorted(k for k in response.headers if k.startswith("x-costgate"))
    return response.status_code, body, names


@pytest.mark.parametrize(
    "body",
    [
        {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]},
        {"model": "no-such-model", "messages": [{"role": "user", "content": "hi"}]},
        {"model": "gpt-4o-mini", "messages": []},
    ],
)
async def test_the_fast_path_and_fastapi_give_the_same_answer(body) -> None:
    fast = Harness(lambda r: httpx.Response(200, json=completion()))
    slow = Harness(lambda r: httpx.Response(200, json=completion()))
    # the same service behind FastAPI alone: what replicas served before the fast path
    before = httpx.AsyncClient(transport=httpx.ASGITransport(app=build_app(slow.service)),
                               base_url="http://gateway", headers=slow.client.headers)
    try:
        a = await fast.chat(body)
        b = await before.post("/v1/chat/completions", json=body)
        assert _comparable(a) == _comparable(b)
        assert len(fast.records) == len(slow.records) == 1  # one row each, fast or not
        assert fast.records[0].http_status == slow.records[0].http_status
    finally:
        await before.aclose()
        await fast.aclose()
        await slow.aclose()


async def test_other_methods_and_paths_still_reach_fastapi() -> None:
    h = Harness(lambda r: httpx.Response(200, json=completion()))
    try:
        wrong_method = await h.client.get("/v1/chat/completions")
        assert wrong_method.status_code == 405
        assert wrong_method.json()["error"]["code"] == "invalid_route"
        assert (await h.client.get("/healthz")).json() == {"status": "ok"}
        assert (await h.client.post("/v1/nothing", json={})).status_code == 404
        assert h.records == []
    finally:
        await h.aclose()


def _routes(handler: Any) -> FastRoutes:
    return FastRoutes(FastAPI(), {"/v1/chat/completions": handler})


async def test_an_openai_error_from_a_handler_is_its_openai_answer() -> None:
    async def refuse(request: Request) -> Response:
        raise OpenAIError(429, "slow down", code="rate_limited", headers={"retry-after": "2"})

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=_routes(refuse)),
                                 base_url="http://gw") as client:
        answer = await client.post("/v1/chat/completions", json={})
    assert answer.status_code == 429
    assert answer.headers["retry-after"] == "2"
    assert answer.json()["error"]["message"] == "slow down"


async def test_a_bug_in_a_handler_is_a_plain_500_and_raised_on_for_serve_to_log() -> None:
    async def broken(request: Request) -> Response:
        raise RuntimeError("a bug")

    app = _routes(broken)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") \
            as client:
        with pytest.raises(RuntimeError, match="a bug"):
            await client.post("/v1/chat/completions", json={})
    quiet = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=quiet, base_url="http://gw") as client:
        answer = await client.post("/v1/chat/completions", json={})
    assert (answer.status_code, answer.text) == (500, "Internal Server Error")


async def test_routes_match_below_the_apps_mount_point() -> None:
    seen: list[str] = []

    async def ok(request: Request) -> Response:
        seen.append(request.url.path)
        return Response(b"{}", media_type="application/json")

    transport = httpx.ASGITransport(app=_routes(ok), root_path="/gw")
    async with httpx.AsyncClient(transport=transport, base_url="http://h") as client:
        assert (await client.post("/gw/v1/chat/completions", json={})).status_code == 200
    assert seen == ["/gw/v1/chat/completions"]
