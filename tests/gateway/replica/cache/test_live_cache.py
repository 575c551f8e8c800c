"""The response cache's acceptance, on a real 2-replica Ray Serve gateway (`costgate up`),
the sim upstream, this module's own Redis and the gateway's own PostgreSQL ledger."""

from __future__ import annotations

import asyncio
import time
import uuid
from decimal import Decimal
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from db.engine import make_engine
from db.keys import create_key
from tests.fixtures.gateway import RunningGateway
from tests.gateway.replica.cache.conftest import RedisProcess

pytestmark = pytest.mark.ray

MODEL = "gpt-4o"
ON = {"x-costgate-cache": "on"}


def _body(**extra: Any) -> dict[str, Any]:
    prompt = f"say something about {uuid.uuid4().hex}"
    messages = [{"role": "user", "content": prompt}]
    return {"model": MODEL, "max_tokens": 40, "messages": messages} | extra


def _auth(key: str, **headers: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"} | headers


async def _post(gw: RunningGateway, key: str, body: dict[str, Any], **h: str) -> httpx.Response:
    async with httpx.AsyncClient(base_url=gw.base_url, timeout=60) as client:
        return await client.post("/v1/chat/completions", json=body, headers=_auth(key, **h))


async def _stream(
    gw: RunningGateway, key: str, body: dict[str, Any], **h: str
) -> tuple[httpx.Response, list[str]]:
    async with httpx.AsyncClient(base_url=gw.base_url, timeout=60) as client:
        req = client.build_request(
            "POST", "/v1/chat/completions", json=body | {"stream": True}, headers=_auth(key, **h)
        )
        resp = await client.send(req, stream=True)
        events = [line async for line in resp.aiter_lines() if line.startswith("data: ")]
        await resp.aclose()
        return resp, events


def _stored(redis: RedisProcess, n: int, timeout_s: float = 10) -> None:
    """Wait until Redis holds `n` entries (a store runs after the answer went out)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if int(redis.command("DBSIZE") or 0) >= n:
            return
        time.sleep(0.05)
    raise AssertionError(f"Redis holds {redis.command('DBSIZE')} entries, not {n}")


def _rows(gw: RunningGateway, app: str, n: int, timeout_s: float = 30) -> list[Any]:
    engine = make_engine(gw.database_url)
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            with engine.connect() as conn:
                rows = conn.execute(
                    text(
                        "SELECT cache_hit, status, stream, actual_cost_usd, list_cost_usd,"
                        " prompt_tokens, completion_tokens, attempts, model, endpoint"
                        " FROM usage_records WHERE app = :app ORDER BY started_at"
                    ),
                    {"app": app},
                ).all()
            if len(rows) >= n or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    finally:
        engine.dispose()
    assert len(rows) == n, rows
    return list(rows)


APPS: dict[str, str] = {}  # key -> its app


@pytest.fixture(scope="module")
def keys(cached_gateway: RunningGateway) -> dict[str, str]:
    out = {}
    for letter in "abcdef":  # created together: replicas load new keys every few seconds
        app = f"cache-{letter}-{uuid.uuid4().hex[:6]}"
        out[letter] = key = create_key(cached_gateway.database_url, app)[0]
        APPS[key] = app
    return out


async def test_an_opted_in_repeat_hits_and_is_a_zero_dollar_row_with_its_list_price(
    cached_gateway: RunningGateway, redis_server: RedisProcess, keys: dict[str, str]
) -> None:
    gw, key = cached_gateway, keys["a"]
    before = int(redis_server.command("DBSIZE") or 0)
    body = _body()
    first = await _post(gw, key, body, **ON)
    assert first.status_code == 200, first.text
    assert first.headers["x-costgate-cache"] == "miss"
    _stored(redis_server, before + 1)
    second = await _post(gw, key, body, **ON)
    assert second.status_code == 200
    assert second.headers["x-costgate-cache"] == "hit"
    assert second.json() == first.json()
    # without the opt-in the cache is off, and the upstream answers
    third = await _post(gw, key, body)
    assert third.headers["x-costgate-cache"] == "off"

    app = _app_of(gw, key)
    rows = _rows(gw, app, 3)
    miss, hit, off = rows
    assert (miss.cache_hit, hit.cache_hit, off.cache_hit) == (False, True, False)
    assert hit.status == "ok" and hit.attempts == 0 and hit.model == miss.model == MODEL
    assert hit.actual_cost_usd == Decimal(0)
    assert (hit.prompt_tokens, hit.completion_tokens) == (miss.prompt_tokens,
                                                           miss.completion_tokens)
    # priced as if served: its list price is the miss's, all of it saved
    assert hit.list_cost_usd == miss.list_cost_usd > 0
    assert miss.actual_cost_usd > 0


async def test_a_streamed_repeat_is_replayed_in_as_many_chunks(
    cached_gateway: RunningGateway, redis_server: RedisProcess, keys: dict[str, str]
) -> None:
    gw, key = cached_gateway, keys["b"]
    before = int(redis_server.command("DBSIZE") or 0)
    body = _body(stream_options={"include_usage": True})
    first, events = await _stream(gw, key, body, **ON)
    assert first.status_code == 200 and first.headers["x-costgate-cache"] == "miss"
    _stored(redis_server, before + 1)
    second, replayed = await _stream(gw, key, body, **ON)
    assert second.status_code == 200 and second.headers["x-costgate-cache"] == "hit"
    assert second.headers["content-type"].startswith("text/event-stream")
    assert len(events) > 3  # role, several content chunks, usage, [DONE]
    assert replayed == events
    assert replayed[-1] == "data: [DONE]" and '"usage"' in replayed[-2]
    # the same request without include_usage: a hit too, without the usage chunk
    third, no_usage = await _stream(gw, key, _body() | {"messages": body["messages"]}, **ON)
    assert third.headers["x-costgate-cache"] == "hit"
    assert len(no_usage) == len(events) - 1 and not any('"usage"' in e for e in no_usage)
    rows = _rows(gw, _app_of(gw, key), 3)
    assert [r.cache_hit for r in rows] == [False, True, True]
    assert all(r.stream for r in rows)
    assert rows[1].actual_cost_usd == 0 and rows[1].list_cost_usd == rows[0].list_cost_usd


async def test_another_app_misses_no_cache_bypasses_and_the_ttl_expires(
    cached_gateway: RunningGateway, redis_server: RedisProcess, keys: dict[str, str]
) -> None:
    gw = cached_gateway
    body = _body()
    before = int(redis_server.command("DBSIZE") or 0)
    assert (await _post(gw, keys["a"], body, **ON)).headers["x-costgate-cache"] == "miss"
    _stored(redis_server, before + 1)
    assert (await _post(gw, keys["a"], body, **ON)).headers["x-costgate-cache"] == "hit"
    other = await _post(gw, keys["c"], body, **ON)
    assert other.status_code == 200 and other.headers["x-costgate-cache"] == "miss"
    bypass = await _post(gw, keys["a"], body, **ON, **{"cache-control": "no-cache"})
    assert bypass.status_code == 200 and bypass.headers["x-costgate-cache"] == "bypass"
    assert bypass.json()["id"] != other.json()["id"]  # the upstream answered it

    short = _body()
    n = int(redis_server.command("DBSIZE") or 0)
    stored = await _post(gw, keys["c"], short, **ON, **{"cache-control": "max-age=1"})
    assert stored.headers["x-costgate-cache"] == "miss"
    _stored(redis_server, n + 1)
    assert (await _post(gw, keys["c"], short, **ON)).headers["x-costgate-cache"] == "hit"
    time.sleep(1.5)  # its 1 s TTL passes: Redis dropped it
    assert (await _post(gw, keys["c"], short, **ON)).headers["x-costgate-cache"] == "miss"


async def _messages(
    gw: RunningGateway, key: str, body: dict[str, Any], **h: str
) -> tuple[httpx.Response, list[str]]:
    """A Messages request with Anthropic's headers; a stream's lines (`event:`, `data:`)."""
    headers = {"x-api-key": key, "anthropic-version": "2023-06-01"} | h
    async with httpx.AsyncClient(base_url=gw.base_url, timeout=60) as client:
        req = client.build_request("POST", "/v1/messages", json=body, headers=headers)
        resp = await client.send(req, stream=True)
        lines = [line async for line in resp.aiter_lines() if line]
        await resp.aclose()
        return resp, lines


@pytest.mark.parametrize(("model", "letter"), [("claude-haiku-4.5", "e"), ("gpt-4o", "f")])
async def test_messages_repeats_hit_plain_and_streamed_from_one_entry_and_save_their_list_price(
    cached_gateway: RunningGateway, redis_server: RedisProcess, keys: dict[str, str],
    model: str, letter: str,
) -> None:
    # native to Anthropic, and translated to an OpenAI-compatible upstream
    gw, key = cached_gateway, keys[letter]
    app = _app_of(gw, key)
    body = _body() | {"model": model}
    before = int(redis_server.command("DBSIZE") or 0)
    first, plain = await _messages(gw, key, body, **ON)
    assert first.status_code == 200 and first.headers["x-costgate-cache"] == "miss", plain
    _stored(redis_server, before + 1)
    streamed = body | {"stream": True}  # one entry answers the stream too
    s_first, events = await _messages(gw, key, streamed, **ON)
    assert s_first.headers["x-costgate-cache"] == "hit"
    second, plain_again = await _messages(gw, key, body, **ON)
    assert second.headers["x-costgate-cache"] == "hit" and plain_again == plain
    assert second.headers["content-type"].startswith("application/json")
    s_second, replayed = await _messages(gw, key, streamed, **ON)
    assert s_second.headers["x-costgate-cache"] == "hit"
    assert s_second.headers["content-type"].startswith("text/event-stream")
    # as many events, each with its name, in the same order, usage in message_delta
    assert replayed == events and len(events) > 8
    assert events[0] == "event: message_start" and events[-2] == "event: message_stop"
    assert any('"usage"' in line and "message_delta" in line for line in replayed)
    rows = _rows(gw, app, 4)
    assert all(r.endpoint == "messages" and r.model == model for r in rows)
    assert [(r.cache_hit, r.stream) for r in rows] == [
        (False, False), (True, True), (True, False), (True, True)]
    for miss, hit in ((rows[0], rows[1]), (rows[0], rows[2]), (rows[0], rows[3])):
        assert hit.status == "ok" and hit.attempts == 0 and hit.actual_cost_usd == 0
        assert hit.list_cost_usd == miss.list_cost_usd > 0
        assert (hit.prompt_tokens, hit.completion_tokens) == (miss.prompt_tokens,
                                                               miss.completion_tokens)


async def test_both_replicas_share_hits_through_redis(
    cached_gateway: RunningGateway, redis_server: RedisProcess, keys: dict[str, str]
) -> None:
    gw, key = cached_gateway, keys["d"]
    body = _body()
    earlier = await _metrics(gw, 'costgate_cache_lookups_total{result="hit"}', at_least=0)
    before = int(redis_server.command("DBSIZE") or 0)
    miss = await _post(gw, key, body, **ON)
    assert miss.headers["x-costgate-cache"] == "miss"
    storer = miss.headers["x-costgate-replica"]  # the one replica that stored the entry
    _stored(redis_server, before + 1)
    # bursts of 24 at once until Serve has sent some to the other replica: each answer says
    # which replica gave it, and every one is a hit, the other replica's included (with an
    # LRU per replica, the other one would miss)
    served: list[tuple[str, str]] = []
    async with httpx.AsyncClient(base_url=gw.base_url, timeout=60) as client:
        for _ in range(5):
            replies = await asyncio.gather(
                *(client.post("/v1/chat/completions", json=body, headers=_auth(key, **ON))
                  for _ in range(24))
            )
            served += [(r.headers["x-costgate-replica"], r.headers["x-costgate-cache"])
                       for r in replies]
            if any(replica != storer for replica, _ in served):
                break
    assert {state for _, state in served} == {"hit"}
    others = {replica for replica, _ in served if replica != storer}
    assert len(others) == 1, (storer, served)  # the second of the two replicas
    assert all(r.json() == miss.json() for r in replies)
    # these hits on top of the tests' before (replicas push their counts each second)
    hits = await _metrics(gw, 'costgate_cache_lookups_total{result="hit"}',
                          at_least=earlier + len(served))
    assert hits >= earlier + len(served)
    assert await _metrics(gw, 'costgate_cache_bytes_total{direction="served"}') > 0


async def test_with_redis_stopped_requests_still_succeed(
    cached_gateway: RunningGateway, redis_server: RedisProcess, keys: dict[str, str]
) -> None:
    gw, key = cached_gateway, keys["a"]
    body = _body()
    redis_server.stop()  # this module's own instance, by its PID
    for _ in range(4):
        plain = await _post(gw, key, body, **ON)
        assert plain.status_code == 200, plain.text
        assert plain.headers["x-costgate-cache"] == "miss"
        streamed, events = await _stream(gw, key, body, **ON)
        assert streamed.status_code == 200 and events[-1] == "data: [DONE]"
    assert await _metrics(gw, 'costgate_cache_skips_total{reason="error"}') >= 1


async def _metrics(
    gw: RunningGateway, sample: str, at_least: float = 1, timeout_s: float = 15
) -> float:
    """The sum of a sample's series on /metrics, once it shows (pushed every second)."""
    deadline = time.monotonic() + timeout_s
    total = 0.0
    async with httpx.AsyncClient(base_url=gw.base_url, timeout=30) as client:
        while time.monotonic() < deadline:
            page = (await client.get("/metrics")).text
            total = sum(
                float(line.rsplit(" ", 1)[1])
                for line in page.splitlines()
                if line.startswith(sample.split("{")[0]) and all(
                    part in line for part in sample.split("{")[1:]
                )
            )
            if total >= at_least:
                return total
            await asyncio.sleep(0.5)
    return total


def _app_of(gw: RunningGateway, key: str) -> str:
    return APPS[key]
