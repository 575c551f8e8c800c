"""The request path of one replica, end to end but without a network: the real
GatewayService and HTTP app, the upstream answered by an `httpx.MockTransport`.

These pin what the integration tests (against the sim, on Ray) also check, at unit-test
speed and with upstream behaviour that is exact: which attempts were made, what each
got, and the one record each request leaves.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from decimal import Decimal
from typing import Any

import httpx
import pytest
import yaml

from db.keys import hash_key
from gateway.domain.config import Config, default_config_path, load_config, parse_config
from gateway.domain.token_estimate import estimate_prompt_tokens
from gateway.domain.usage_record import RequestStatus, UsageRecord, UsageSource
from gateway.replica.auth import Caller, KeyRing
from gateway.replica.http_api import serve_app
from gateway.replica.service import GatewayService, RecordSink

SECRET = "sk-unit-provider-secret"
Handler = Callable[[httpx.Request], Any]  # a Response, or a coroutine giving one
# the example config requires keys: the harness's client sends this one unless told
APP_KEY = "cg-unit-app-key"
APP = Caller(app="unit-app", team="unit", key_id=uuid.uuid4())


class Chunks(httpx.AsyncByteStream):
    """A response body that arrives in pieces, like a network read would deliver it."""

    def __init__(self, parts: list[bytes], *, fail: bool = False, gap_s: float = 0.0) -> None:
        self.parts = parts
        self.fail = fail  # the connection breaks after the parts
        self.gap_s = gap_s  # a pause before each part after the first

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for i, part in enumerate(self.parts):
            if i and self.gap_s:
                await asyncio.sleep(self.gap_s)
            yield part
        if self.fail:
            raise httpx.ReadError("connection reset by peer")


def completion(text: str = "Hello!", usage: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "upstream-id",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                     "finish_reason": "stop"}],
        "usage": usage or {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
    }


def sse(*events: dict[str, Any] | str) -> list[bytes]:
    out = []
    for e in events:
        data = e if isinstance(e, str) else json.dumps(e)
        out.append(f"data: {data}\n\n".encode())
    return out


def delta(text: str | None, finish: str | None = None) -> dict[str, Any]:
    return {"id": "c", "object": "chat.completion.chunk", "model": "upstream-id",
            "choices": [{"index": 0, "delta": {"content": text} if text else {},
                         "finish_reason": finish}]}


USAGE_CHUNK = {"id": "c", "object": "chat.completion.chunk", "model": "upstream-id",
               "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 2}}


class Harness:
    def __init__(
        self,
        handler: Handler,
        cfg: Config | None = None,
        *,
        keys: Mapping[str, Caller] | None = None,
        key: str | None = APP_KEY,
        render_metrics: Any = None,
    ) -> None:
        """`keys` (key -> caller) are the ring's; `key` is what the client sends."""
        self.seen: list[httpx.Request] = []
        self.records: list[UsageRecord] = []

        def record(request: httpx.Request) -> httpx.Response:
            self.seen.append(request)
            return handler(request)

        cfg = cfg or load_config(default_config_path())
        ring = KeyRing(require_keys=cfg.gateway.require_keys)
        ring.replace({hash_key(k): c for k, c in (keys or {APP_KEY: APP}).items()})
        self.service = GatewayService(
            cfg,
            sink=RecordSink(submit=self.records.append),
            transport=httpx.MockTransport(record),
            keyring=ring,
        )
        self.client = httpx.AsyncClient(
            transport=httpx.ASGITransport(
                app=serve_app(self.service, render_metrics=render_metrics)
            ),
            base_url="http://gateway",
            headers={"authorization": f"Bearer {key}"} if key else None,
        )

    async def chat(self, body: dict[str, Any], **headers: str) -> httpx.Response:
        return await self.client.post("/v1/chat/completions", json=body, headers=headers)

    def upstream_bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r.content) for r in self.seen]

    async def aclose(self) -> None:
        await self.client.aclose()
        await self.service.aclose()


@pytest.fixture
def provider_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for env in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "DEEPSEEK_API_KEY",
                "RELAY_API_KEY"):
        monkeypatch.setenv(env, SECRET)


@pytest.fixture
async def harness_for(provider_keys: None) -> AsyncIterator[Callable[[Handler], Harness]]:
    made: list[Harness] = []

    def make(handler: Handler, cfg: Config | None = None) -> Harness:
        made.append(Harness(handler, cfg))
        return made[-1]

    yield make
    for h in made:
        await h.aclose()


PINNED = {"x-costgate-no-fallback": "true"}
MESSAGES = [{"role": "user", "content": "Say hello"}]


async def test_a_completion_is_relayed_priced_and_recorded_once(harness_for):
    h = harness_for(lambda _: httpx.Response(200, json=completion()))
    resp = await h.chat({"model": "gpt-4.1", "messages": MESSAGES, "x_unknown": 7})
    assert resp.status_code == 200
    body = resp.json()
    assert body["model"] == "gpt-4.1" and body["choices"][0]["message"]["content"] == "Hello!"
    assert resp.headers["x-costgate-model"] == "gpt-4.1"
    sent = h.upstream_bodies()[0]
    assert sent["model"] == h.service.cfg.models_by_name["gpt-4.1"].upstream_model
    assert sent["x_unknown"] == 7  # unknown fields pass through
    assert h.seen[0].headers["authorization"] == f"Bearer {SECRET}"
    assert h.seen[0].url.path.endswith("/chat/completions")
    [record] = h.records
    assert record.status is RequestStatus.OK and record.usage_source is UsageSource.PROVIDER
    assert (record.prompt_tokens, record.completion_tokens) == (12, 3)
    # gpt-4.1 lists $2.00 in / $8.00 out per 1M tokens: 12 × 2 + 3 × 8 = 48 micro-dollars
    assert record.list_cost_usd == Decimal("0.000048")
    assert str(record.request_id) == resp.headers["x-costgate-request-id"]
    assert SECRET not in repr(record)


async def test_a_5xx_is_retried_and_the_record_counts_both_attempts(harness_for):
    answers = iter([httpx.Response(503, json={"error": {"message": "busy"}}),
                    httpx.Response(200, json=completion())])
    h = harness_for(lambda _: next(answers))
    resp = await h.chat({"model": "gpt-4.1", "messages": MESSAGES}, **PINNED)
    assert resp.status_code == 200
    [record] = h.records
    assert record.attempts == 2 and record.fallback_path == ("gpt-4.1", "gpt-4.1")


async def test_a_failing_model_falls_back_to_its_fallback(harness_for):
    def handler(request: httpx.Request) -> httpx.Response:
        if str(request.url).startswith(openai_url):
            return httpx.Response(500, json={"error": {"message": "down"}})
        return httpx.Response(200, json=completion())

    h = harness_for(handler)
    openai_url = h.service.cfg.provider("openai").base_url.rstrip("/") + "/"
    resp = await h.chat({"model": "gpt-4.1", "messages": MESSAGES})
    assert resp.status_code == 200
    assert resp.headers["x-costgate-model"] == "relay-gpt-4.1"
    [record] = h.records
    assert record.fallback_path[-1] == "relay-gpt-4.1" and record.status is RequestStatus.OK


async def test_an_upstream_4xx_passes_on_unchanged_and_is_not_retried(harness_for):
    err = {"error": {"message": "context too long", "type": "invalid_request_error",
                     "param": "messages", "code": "context_length_exceeded"}}
    h = harness_for(lambda _: httpx.Response(400, json=err))
    resp = await h.chat({"model": "gpt-4.1", "messages": MESSAGES})
    assert resp.status_code == 400
    assert resp.json()["error"]["code"] == "context_length_exceeded"
    assert len(h.seen) == 1
    [record] = h.records
    assert record.status is RequestStatus.CLIENT_ERROR and record.http_status == 400


async def test_a_429_everywhere_answers_429_with_retry_after(harness_for):
    h = harness_for(lambda _: httpx.Response(429, headers={"retry-after": "7"}))
    resp = await h.chat({"model": "gpt-4.1", "messages": MESSAGES}, **PINNED)
    assert resp.status_code == 429 and int(resp.headers["retry-after"]) >= 1
    [record] = h.records
    assert record.status is RequestStatus.UPSTREAM_ERROR and record.error_class == "rate_limited"


async def test_a_timeout_answers_504_and_is_recorded_at_the_prompts_it_may_be_billed(
    harness_for,
):
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    h = harness_for(handler)
    resp = await h.chat({"model": "gpt-4.1", "messages": MESSAGES}, **PINNED)
    assert resp.status_code == 504 and resp.json()["error"]["code"] == "timeout"
    [record] = h.records
    assert record.error_class == "timeout" and record.usage_source is UsageSource.ESTIMATED
    # every attempt reached the provider, which bills a prompt it read: each counts
    assert record.attempts >= 2 and len(h.seen) == record.attempts
    one = estimate_prompt_tokens(MESSAGES)
    assert record.prompt_tokens == one * record.attempts and record.completion_tokens == 0
    assert record.actual_cost_usd is not None and record.actual_cost_usd > 0


async def test_an_overloaded_upstream_bills_nothing_and_is_recorded_unpriced(harness_for):
    h = harness_for(lambda _: httpx.Response(503, json={"error": {"message": "busy"}}))
    resp = await h.chat({"model": "gpt-4.1", "messages": MESSAGES}, **PINNED)
    assert resp.status_code == 502
    [record] = h.records
    assert record.usage_source is UsageSource.MISSING and record.actual_cost_usd is None


async def test_a_body_that_is_no_completion_is_a_502_malformed(harness_for):
    h = harness_for(lambda _: httpx.Response(200, content=b"<html>oops</html>"))
    resp = await h.chat({"model": "gpt-4.1", "messages": MESSAGES}, **PINNED)
    assert resp.status_code == 502 and resp.json()["error"]["code"] == "malformed"
    assert SECRET not in resp.text


async def test_a_stream_is_relayed_under_the_requested_name_with_usage_recorded(harness_for):
    parts = sse(delta("Hel"), delta("lo"), delta(None, "stop"), USAGE_CHUNK, "[DONE]")
    h = harness_for(lambda _: httpx.Response(200, stream=Chunks(parts)))
    # "budget": an alias whose models all speak OpenAI's format, as the mock answers
    resp = await h.chat({"model": "budget", "messages": MESSAGES, "stream": True})
    assert resp.status_code == 200
    events = [line[6:] for line in resp.text.split("\n\n") if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert {c["model"] for c in chunks} == {"budget"}
    assert all("usage" not in c for c in chunks)  # the client did not ask for usage
    assert h.upstream_bodies()[0]["stream_options"] == {"include_usage": True}
    [record] = h.records
    assert record.status is RequestStatus.OK and record.stream
    assert record.usage_source is UsageSource.PROVIDER and record.completion_tokens == 2
    assert record.alias == "budget" and record.ttft_ms is not None


async def test_a_stream_shows_usage_when_the_client_asks(harness_for):
    parts = sse(delta("Hi", "stop"), USAGE_CHUNK, "[DONE]")
    h = harness_for(lambda _: httpx.Response(200, stream=Chunks(parts)))
    resp = await h.chat({"model": "gpt-4.1", "messages": MESSAGES, "stream": True,
                         "stream_options": {"include_usage": True}})
    events = [json.loads(line[6:]) for line in resp.text.split("\n\n")
              if line.startswith("data: {")]
    assert events[-1]["usage"]["prompt_tokens"] == 9


async def test_a_stream_cut_short_ends_with_an_error_event_and_an_estimate(harness_for):
    parts = sse(delta("Once upon"), delta(" a time"))
    h = harness_for(lambda _: httpx.Response(200, stream=Chunks(parts)))
    resp = await h.chat({"model": "gpt-4.1", "messages": MESSAGES, "stream": True})
    assert '"type":"upstream_error"' in resp.text
    [record] = h.records
    assert record.status is RequestStatus.UPSTREAM_ERROR and record.error_class == "reset"
    assert record.usage_source is UsageSource.ESTIMATED and record.completion_tokens >= 2


async def test_a_malformed_chunk_ends_the_stream_and_is_recorded(harness_for):
    parts = sse(delta("ok")) + [b"data: {broken\n\n"]
    h = harness_for(lambda _: httpx.Response(200, stream=Chunks(parts)))
    resp = await h.chat({"model": "gpt-4.1", "messages": MESSAGES, "stream": True})
    assert "malformed chunk" in resp.text
    [record] = h.records
    assert record.error_class == "malformed"


async def test_an_empty_stream_is_a_502_malformed_and_not_billed_twice(harness_for):
    h = harness_for(lambda _: httpx.Response(200, stream=Chunks([])))
    resp = await h.chat({"model": "gpt-4.1", "messages": MESSAGES, "stream": True})
    assert resp.status_code == 502 and resp.json()["error"]["code"] == "malformed"
    assert len(h.seen) == 1  # a broken answer is not asked for again
    [record] = h.records
    assert record.status is RequestStatus.UPSTREAM_ERROR and record.error_class == "malformed"


async def test_a_reset_before_the_first_event_is_retried_unseen_by_the_client(harness_for):
    answers = iter([httpx.Response(200, stream=Chunks([], fail=True)),
                    httpx.Response(200, stream=Chunks(sse(delta("x", "stop"), "[DONE]")))])
    h = harness_for(lambda _: next(answers))
    resp = await h.chat({"model": "gpt-4.1", "messages": MESSAGES, "stream": True}, **PINNED)
    assert resp.status_code == 200 and resp.text.endswith("data: [DONE]\n\n")
    [record] = h.records
    assert record.attempts == 2 and record.status is RequestStatus.OK


async def test_bad_input_is_refused_before_any_upstream_call(harness_for):
    h = harness_for(lambda _: httpx.Response(200, json=completion()))
    resp = await h.client.post("/v1/chat/completions", content=b"{not json",
                               headers={"content-type": "application/json"})
    assert resp.status_code == 400 and resp.json()["error"]["type"] == "invalid_request_error"
    resp = await h.chat({"model": "no-such-model", "messages": MESSAGES})
    assert resp.status_code == 404
    assert h.seen == []
    assert [r.http_status for r in h.records] == [400, 404]


def config_with(**timeouts: float) -> Config:
    """The example config with every provider's timeouts changed."""
    raw = yaml.safe_load(default_config_path().read_text())
    for provider in raw["providers"]:
        provider["timeouts"] = {**provider.get("timeouts", {}), **timeouts}
    return parse_config(raw)


async def test_a_request_abandoned_mid_call_leaves_one_cancelled_row_with_its_prompt(
    harness_for,
):
    started = asyncio.Event()

    async def handler(_: httpx.Request) -> httpx.Response:
        started.set()
        await asyncio.Event().wait()  # the upstream never answers
        raise AssertionError("unreachable")

    h = harness_for(handler)
    call = asyncio.create_task(h.chat({"model": "gpt-4.1", "messages": MESSAGES}))
    await asyncio.wait_for(started.wait(), 5)
    call.cancel()  # what Serve does when the client hangs up
    with pytest.raises(asyncio.CancelledError):
        await call
    [record] = h.records
    assert record.status is RequestStatus.CANCELLED and record.error_class == "client_disconnected"
    assert record.usage_source is UsageSource.ESTIMATED and record.prompt_tokens > 0
    assert record.completion_tokens == 0 and record.list_cost_usd is not None


async def test_a_request_cancelled_before_any_upstream_call_is_recorded_unpriced(harness_for):
    h = harness_for(lambda _: httpx.Response(200, json=completion()))
    gate = asyncio.Event()

    async def slow_body() -> AsyncIterator[bytes]:
        yield b'{"model": "gpt-4.1",'
        await gate.wait()
        yield b'"messages": []}'

    call = asyncio.create_task(h.client.post("/v1/chat/completions", content=slow_body()))
    await asyncio.sleep(0.1)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    [record] = h.records
    assert record.status is RequestStatus.CANCELLED and record.attempts == 0
    assert record.actual_cost is None and h.seen == []


async def test_a_chunked_body_over_the_limit_is_refused_while_it_arrives(harness_for):
    h = harness_for(lambda _: httpx.Response(200, json=completion()))
    limit = h.service.cfg.gateway.max_body_bytes
    sent = 0

    async def endless() -> AsyncIterator[bytes]:
        nonlocal sent
        while sent < 4 * limit:
            sent += 65536
            yield b" " * 65536

    resp = await h.client.post("/v1/chat/completions", content=endless())
    assert resp.status_code == 413 and resp.json()["error"]["code"] == "request_too_large"
    assert sent <= limit + 65536  # refused at the limit, not after reading it all


async def test_a_json_bomb_is_a_400(harness_for):
    h = harness_for(lambda _: httpx.Response(200, json=completion()))
    resp = await h.client.post("/v1/chat/completions", content=b"[" * 100_000)
    assert resp.status_code == 400 and resp.json()["error"]["code"] == "invalid_json"
    assert h.seen == []


async def test_a_stream_past_its_deadline_is_cut_and_recorded_as_such(harness_for):
    parts = sse(*[delta("tick") for _ in range(50)], "[DONE]")
    h = harness_for(lambda _: httpx.Response(200, stream=Chunks(parts, gap_s=0.05)),
                    cfg=config_with(stream_total=0.3))
    resp = await h.chat({"model": "gpt-4.1", "messages": MESSAGES, "stream": True}, **PINNED)
    assert "deadline" in resp.text and not resp.text.endswith("data: [DONE]\n\n")
    [record] = h.records
    assert record.status is RequestStatus.UPSTREAM_ERROR and record.error_class == "stream_deadline"
    assert record.http_status == 504 and record.usage_source is UsageSource.ESTIMATED


async def test_an_endless_stream_line_is_malformed_not_buffered(harness_for):
    first = sse(delta("ok"))
    h = harness_for(lambda _: httpx.Response(
        200, stream=Chunks(first + [b"data: " + b"x" * 65536] * 200)))
    resp = await h.chat({"model": "gpt-4.1", "messages": MESSAGES, "stream": True}, **PINNED)
    assert "malformed chunk" in resp.text
    [record] = h.records
    assert record.error_class == "malformed"


async def test_an_upstream_error_code_with_nul_is_stored_without_it(harness_for):
    err = {"error": {"message": "bad", "type": "invalid_request_error", "code": "bad\x00code"}}
    h = harness_for(lambda _: httpx.Response(400, json=err))
    resp = await h.chat({"model": "gpt-4.1", "messages": MESSAGES})
    assert resp.status_code == 400
    [record] = h.records
    assert record.error_class == "badcode"


async def test_without_a_shared_store_a_cap_is_split_by_the_replicas_that_run(harness_for):
    raw = yaml.safe_load(default_config_path().read_text())
    raw["gateway"].pop("num_replicas", None)
    raw["gateway"]["autoscaling"] = {"min_replicas": 1, "max_replicas": 4}
    name = raw["models"][0]["name"]
    raw["models"][0]["rpm_limit"] = 120
    h = harness_for(lambda r: httpx.Response(200, json=completion()), parse_config(raw))

    def capacity() -> list[int]:
        return [s.capacity for s in h.service.limits.slices() if s.name == f"model:{name}:rpm"]

    # before the controller's count arrives: the most there may be, never min_replicas
    assert capacity() == [30]
    h.service.set_live_replicas(2)  # autoscaling ran two
    assert capacity() == [60]
    h.service.set_live_replicas(3)
    assert capacity() == [40]
