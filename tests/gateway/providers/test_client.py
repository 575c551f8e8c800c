"""UpstreamClient's whole answers, through aiohttp's pool (no httpx Request or Response
around them) against the real sim, and through httpx's path for another transport: the
same replies, failures and classifications either way."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from gateway.domain.config import Config, Provider, load_config
from gateway.domain.openai_errors import OpenAIError, bad_request
from gateway.providers.adapter import WireRequest
from gateway.providers.client import UpstreamClient, UpstreamFailure
from gateway.routing.retry_policy import FailureReason
from tests.fixtures.ports import port_is_free

BODY = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}


def _config(sim: Any, **read_timeout: float) -> Config:
    cfg = load_config(sim.config_path)
    if not read_timeout:
        return cfg
    providers = [
        p.model_copy(update={"timeouts": p.timeouts.model_copy(update=read_timeout)})
        for p in cfg.providers
    ]
    return cfg.model_copy(update={"providers": providers})


@pytest.fixture(params=["aiohttp", "httpx"])
def transport(request: pytest.FixtureRequest) -> httpx.AsyncBaseTransport | None:
    # None: the replica's own (aiohttp's pool, read straight); an httpx transport: the
    # path tests with httpx.MockTransport take, here over real sockets
    return None if request.param == "aiohttp" else httpx.AsyncHTTPTransport()


async def _complete(cfg: Config, transport: Any, **kwargs: Any) -> Any:
    client = UpstreamClient(cfg, transport=transport)
    try:
        return await client.complete(cfg.models_by_name["gpt-4o"], BODY, **kwargs)
    finally:
        await client.aclose()


async def test_a_whole_answer_is_parsed_with_its_usage(sim, transport):
    reply = await _complete(_config(sim), transport)
    assert reply.reply.usage is not None and reply.reply.usage.prompt_tokens > 0
    assert reply.reply.text and reply.latency_ms >= 0
    sent = sim.recent_requests()[-1]
    assert {"user-agent", "content-type"} <= set(sent["header_names"])
    assert "accept-encoding" not in sent["header_names"]  # bodies come uncompressed


async def test_a_rate_limit_keeps_its_retry_after(sim, transport):
    sim.set_fault("gpt-4o", "rate_limit", retry_after_s=7)
    with pytest.raises(UpstreamFailure) as info:
        await _complete(_config(sim), transport)
    assert info.value.status == 429 and info.value.retry_after == 7
    assert info.value.verdict.reason is FailureReason.RATE_LIMITED


async def test_an_upstream_400_passes_its_body_on(sim, transport):
    sim.set_fault("gpt-4o", "bad_request")
    with pytest.raises(UpstreamFailure) as info:
        await _complete(_config(sim), transport)
    assert info.value.status == 400 and info.value.error_body is not None


@pytest.mark.parametrize(
    ("fault", "reason"), [("hang", FailureReason.TIMEOUT), ("reset", FailureReason.RESET)]
)
async def test_transport_failures_are_classified(sim, transport, fault, reason):
    sim.set_fault("gpt-4o", fault)
    with pytest.raises(UpstreamFailure) as info:
        await _complete(_config(sim, read=1.0), transport)
    assert info.value.verdict.reason is reason


async def test_a_closed_port_is_a_connect_error(sim, transport):
    cfg = _config(sim)
    port = next(p for p in range(18990, 18999) if port_is_free(p))
    providers = [
        p.model_copy(update={"base_url": f"http://127.0.0.1:{port}/v1"}) if p.name == "openai"
        else p
        for p in cfg.providers
    ]  # fmt: skip
    with pytest.raises(UpstreamFailure) as info:
        await _complete(cfg.model_copy(update={"providers": providers}), transport)
    assert info.value.verdict.reason is FailureReason.CONNECT_ERROR


async def test_what_the_request_builder_refuses_is_the_clients_error_not_the_upstreams(
    sim, transport
):
    # a translation that refuses a field of the client's body raises its 400 while the
    # wire request is built: that is no upstream failure (which would answer 502)
    def refuse(provider: Provider, body: dict[str, Any], key: str | None) -> WireRequest:
        raise bad_request("tools[0] is not an object.", param="tools")

    before = len(sim.recent_requests())
    with pytest.raises(OpenAIError) as info:
        await _complete(_config(sim), transport, build=refuse)
    assert info.value.status == 400 and not isinstance(info.value, UpstreamFailure)
    assert len(sim.recent_requests()) == before  # nothing was sent


async def test_an_answer_that_comes_compressed_anyway_is_decoded(sim, transport):
    # the client asks for no encoding; an upstream (or a proxy before it) may compress all
    # the same, and the reply must still parse
    import gzip
    import json

    from aiohttp import web

    answer = {
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "squeezed"}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }  # fmt: skip

    async def handler(_: web.Request) -> web.Response:
        return web.Response(body=gzip.compress(json.dumps(answer).encode()),
                            headers={"content-encoding": "gzip",
                                     "content-type": "application/json"})  # fmt: skip

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = next(p for p in range(18980, 18990) if port_is_free(p))
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    try:
        cfg = _config(sim)
        providers = [
            p.model_copy(update={"base_url": f"http://127.0.0.1:{port}/v1"})
            if p.name == "openai" else p
            for p in cfg.providers
        ]  # fmt: skip
        reply = await _complete(cfg.model_copy(update={"providers": providers}), transport)
    finally:
        await runner.cleanup()
    assert reply.reply.text == "squeezed" and reply.reply.usage.completion_tokens == 1
