"""OpenAI's `x-ratelimit-*` on every answer to a key with limits (answers, streams, errors
of the request and of the upstream, Messages), and on none to a key without: the real
GatewayService and app, the upstream an `httpx.MockTransport` (see test_service.py)."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest

from gateway.replica.auth import Caller
from tests.gateway.replica.test_service import (
    APP,
    APP_KEY,
    SECRET,
    USAGE_CHUNK,
    Chunks,
    Harness,
    completion,
    delta,
    sse,
)

LIMITED_KEY = "cg-unit-limited"
LIMITED = Caller(app="limited-app", team=None, key_id=uuid.uuid4(), rpm_limit=100,
                 tpm_limit=100_000)
BODY = {"model": "gpt-4o-mini", "max_tokens": 20,
        "messages": [{"role": "user", "content": "hi"}]}


def answer(request: httpx.Request) -> httpx.Response:
    body = json.loads(request.content)
    if body.get("stream"):
        parts = sse(delta("Hi", "stop"), USAGE_CHUNK, "[DONE]")
        return httpx.Response(200, stream=Chunks(parts))
    if body["messages"][0]["content"] == "fail":
        error = {"message": "no", "type": "invalid_request_error"}
        return httpx.Response(400, json={"error": error})
    return httpx.Response(200, json=completion())


@pytest.fixture
async def h(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Harness]:
    for env in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "DEEPSEEK_API_KEY",
                "RELAY_API_KEY"):
        monkeypatch.setenv(env, SECRET)
    harness = Harness(answer, keys={LIMITED_KEY: LIMITED, APP_KEY: APP}, key=None)
    yield harness
    await harness.aclose()


def _limited() -> dict[str, str]:
    return {"authorization": f"Bearer {LIMITED_KEY}"}


async def test_every_answer_to_a_limited_key_carries_its_rate_limits(h: Harness) -> None:
    answers = [
        await h.chat(BODY, **_limited()),
        await h.chat(BODY | {"stream": True}, **_limited()),
        await h.chat(BODY | {"messages": [{"role": "user", "content": "fail"}]}, **_limited()),
        await h.chat(BODY | {"n": 0}, **_limited()),  # refused before admission
        await h.client.post("/v1/messages", headers=_limited() | {"anthropic-version": "x"},
                            json={"model": "gpt-4o-mini", "max_tokens": 0, "messages": []}),
    ]
    assert [a.status_code for a in answers] == [200, 200, 400, 400, 400]
    remaining = []
    for a in answers:
        assert a.headers["x-ratelimit-limit-requests"] == "100"
        assert a.headers["x-ratelimit-limit-tokens"] == "100000"
        assert a.headers["x-ratelimit-reset-requests"]
        remaining.append(int(a.headers["x-ratelimit-remaining-requests"]))
    assert remaining[0] == 99 and remaining[1] == 98 and remaining[2] == 97


async def test_a_key_without_limits_gets_no_rate_limit_headers(h: Harness) -> None:
    a = await h.chat(BODY, authorization=f"Bearer {APP_KEY}")
    assert a.status_code == 200
    assert not any(name.startswith("x-ratelimit-") for name in a.headers)
