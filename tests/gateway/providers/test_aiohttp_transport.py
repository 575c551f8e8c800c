"""The aiohttp-backed httpx transport, against the real sim: bodies, streams, and
failures raised as the httpx exceptions the retry policy classifies."""

from __future__ import annotations

import httpx
import pytest

from gateway.providers.aiohttp_transport import AiohttpTransport
from gateway.routing.retry_policy import FailureReason, classify
from tests.fixtures.ports import port_is_free

BODY = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}


def client(**timeout: float) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=AiohttpTransport(max_connections=8),
        timeout=httpx.Timeout(timeout.get("read", 10.0), connect=2.0),
    )


async def test_a_completion_and_a_stream_come_through(sim):
    async with client() as c:
        r = await c.post(sim.provider_url("openai") + "/chat/completions", json=BODY)
        assert r.status_code == 200 and r.json()["usage"]["prompt_tokens"] > 0
        async with c.stream("POST", sim.provider_url("openai") + "/chat/completions",
                            json=BODY | {"stream": True}) as s:
            lines = [line async for line in s.aiter_lines() if line]
        assert lines[-1] == "data: [DONE]" and len(lines) > 3


async def test_status_and_headers_pass_through(sim):
    sim.set_fault("gpt-4o", "rate_limit", retry_after_s=7)
    async with client() as c:
        r = await c.post(sim.provider_url("openai") + "/chat/completions", json=BODY)
    assert r.status_code == 429 and r.headers["retry-after"] == "7"


@pytest.mark.parametrize(
    ("fault", "reason"),
    [("hang", FailureReason.TIMEOUT), ("reset", FailureReason.RESET)],
)
async def test_failures_become_the_httpx_errors_the_retry_policy_knows(sim, fault, reason):
    sim.set_fault("gpt-4o", fault)
    async with client(read=1.0) as c:
        with pytest.raises(httpx.TransportError) as info:
            await c.post(sim.provider_url("openai") + "/chat/completions", json=BODY)
    verdict = classify(info.value)
    assert verdict is not None and verdict.reason is reason and verdict.retryable


async def test_a_closed_port_is_a_connect_error():
    port = next(p for p in range(18990, 18999) if port_is_free(p))
    async with client() as c:
        with pytest.raises(httpx.ConnectError) as info:
            await c.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=BODY)
    assert classify(info.value).reason is FailureReason.CONNECT_ERROR
