"""The response cache shared without Redis, on a real Ray Serve gateway (`costgate up`, 2
replicas, then `costgate scale 4`), the sim upstream and the ledger's own PostgreSQL.

With an LRU per replica these fail: a repeat that Serve sends to another replica misses.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from typing import Any

import httpx
import psycopg
import pytest

from db.engine import libpq_url
from db.keys import create_key
from gateway.replica.cache.replay import pieces
from tests.fixtures.gateway import RunningGateway
from tests.gateway.replica.cache.test_live_cache import _metrics

pytestmark = pytest.mark.ray

ON = {"x-costgate-cache": "on"}
ROUTES = {"chat": "/v1/chat/completions", "completions": "/v1/completions",
          "responses": "/v1/responses", "messages": "/v1/messages"}


def _body(api: str = "chat", model: str = "gpt-4o") -> dict[str, Any]:
    prompt = f"say something about {uuid.uuid4().hex}"
    if api == "completions":
        return {"model": "gpt-4.1", "prompt": prompt, "max_tokens": 40}
    if api == "responses":
        return {"model": "gpt-4.1", "input": prompt, "max_output_tokens": 40}
    return {"model": model, "max_tokens": 40, "messages": [{"role": "user", "content": prompt}]}


def _send(
    client: httpx.Client, key: str, api: str, body: dict[str, Any], stream: bool = False
) -> tuple[httpx.Response, list[str]]:
    """The answer, and a stream's non-empty lines (its events)."""
    headers = {"authorization": f"Bearer {key}", **ON}
    if api == "messages":
        headers |= {"x-api-key": key, "anthropic-version": "2023-06-01"}
    if not stream:
        return client.post(ROUTES[api], json=body, headers=headers), []
    with client.stream("POST", ROUTES[api], json=body | {"stream": True},
                       headers=headers) as resp:
        lines = [line for line in resp.iter_lines() if line]
    return resp, lines


LEARNED = 'costgate_cache_index_total{event="learned"}'


def _stored(gw: RunningGateway, before: tuple[int, float], n: int, timeout_s: float = 15) -> None:
    """Wait until the shared table holds `n` more live entries than `before` (a store
    follows the answer), and every replica's key index has heard of them (a replica that
    has not would answer a miss without asking the table)."""
    deadline = time.monotonic() + timeout_s
    held = 0
    with psycopg.connect(libpq_url(gw.database_url), autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT count(*) FROM response_cache WHERE expires_at > now()").fetchone()
            held = int(row[0]) if row else 0
            if held >= before[0] + n:
                break
            time.sleep(0.05)
        else:
            raise AssertionError(f"the shared table holds {held} entries, not {before[0] + n}")
    replicas = _run(_metrics(gw, "costgate_metrics_reporting_replicas", 1))
    learned = _run(_metrics(gw, LEARNED, before[1] + n * replicas))
    assert learned >= before[1] + n * replicas, (learned, before, replicas)


def _held(gw: RunningGateway) -> tuple[int, float]:
    """The shared table's live entries, and the keys the replicas' indexes learned."""
    with psycopg.connect(libpq_url(gw.database_url), autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM response_cache WHERE expires_at > now()").fetchone()
        held = int(row[0]) if row else 0
    return held, _run(_metrics(gw, LEARNED, 0))


@pytest.fixture(scope="module")
def keys(shared_gateway: RunningGateway) -> dict[str, str]:
    return {letter: create_key(shared_gateway.database_url, f"shared-{letter}-"
                               f"{uuid.uuid4().hex[:6]}")[0] for letter in "abc"}


def _twenty_repeats_give_19_hits(gw: RunningGateway, key: str, replicas: int) -> None:
    body = _body()
    with gw.client() as client:
        before = _held(gw)
        first, _ = _send(client, key, "chat", body)
        assert first.status_code == 200 and first.headers["x-costgate-cache"] == "miss"
        _stored(gw, before, 1)
        answers = [_send(client, key, "chat", body)[0] for _ in range(19)]
    states = Counter(a.headers["x-costgate-cache"] for a in answers)
    by_replica = Counter(a.headers["x-costgate-replica"] for a in [first, *answers])
    assert states == {"hit": 19}, (states, by_replica)
    assert all(a.json() == first.json() for a in answers)
    # Serve spread them: hits came from replicas that never stored the entry
    assert len(by_replica) >= 2, by_replica
    assert len(by_replica) <= replicas


def test_on_2_replicas_20_sends_of_one_request_give_19_hits(
    shared_gateway: RunningGateway, keys: dict[str, str]
) -> None:
    _twenty_repeats_give_19_hits(shared_gateway, keys["a"], 2)


@pytest.mark.parametrize("api", ["chat", "completions", "responses", "messages"])
def test_a_stream_after_a_plain_answer_hits_and_a_plain_one_after_a_stream(
    shared_gateway: RunningGateway, keys: dict[str, str], api: str
) -> None:
    gw, key = shared_gateway, keys["b"]
    plain_first, streamed_first = _body(api), _body(api)
    with gw.client() as client:
        before = _held(gw)
        miss, _ = _send(client, key, api, plain_first)
        s_miss, events = _send(client, key, api, streamed_first, stream=True)
        assert (miss.status_code, s_miss.status_code) == (200, 200), miss.text
        assert {miss.headers["x-costgate-cache"], s_miss.headers["x-costgate-cache"]} == {
            "miss"}
        _stored(gw, before, 2)
        s_hit, replayed = _send(client, key, api, plain_first, stream=True)
        hit, _ = _send(client, key, api, streamed_first)
    assert s_hit.headers["x-costgate-cache"] == "hit"
    assert s_hit.headers["content-type"].startswith("text/event-stream")
    assert hit.headers["x-costgate-cache"] == "hit"
    assert hit.headers["content-type"].startswith("application/json")
    if api in ("chat", "completions"):
        assert replayed[-1] == "data: [DONE]"
    elif api == "responses":
        assert replayed[-2] == "event: response.completed"
    else:
        assert replayed[0] == "event: message_start" and replayed[-2] == "event: message_stop"
    text = {"chat": lambda a: a["choices"][0]["message"]["content"],
            "completions": lambda a: a["choices"][0]["text"],
            "responses": lambda a: a["output"][0]["content"][0]["text"],
            "messages": lambda a: a["content"][0]["text"]}[api]
    # the stored plain answer's text, streamed; the stored stream's text, assembled
    assert text(miss.json()) and _streamed_text(api, replayed) == text(miss.json())
    # in pieces of a few words, not one event (the sim's answer length is random)
    assert _deltas(api, replayed) == list(pieces(text(miss.json())))
    answer = hit.json()
    assert text(answer) and text(answer) == _streamed_text(api, events)
    assert answer["model"] == streamed_first["model"]


def test_another_apps_key_misses_and_metrics_count_the_ledgers_hits(
    shared_gateway: RunningGateway, keys: dict[str, str]
) -> None:
    gw = shared_gateway
    body = _body()

    def hit_rows(conn: psycopg.Connection) -> int:
        row = conn.execute("SELECT count(*) FROM usage_records WHERE cache_hit").fetchone()
        return int(row[0]) if row else 0

    with psycopg.connect(libpq_url(gw.database_url), autocommit=True) as conn:
        earlier = hit_rows(conn)  # the module's other tests' hits, whichever ran first
        with gw.client() as client:
            before = _held(gw)
            absent = _run(_metrics(gw, 'costgate_cache_index_total{event="absent"}', 0))
            assert _send(client, keys["c"], "chat", body)[0].headers["x-costgate-cache"] == "miss"
            # a key no store announced: answered by the replica's index, not the table
            assert _run(_metrics(gw, 'costgate_cache_index_total{event="absent"}',
                                 absent + 1)) >= absent + 1
            _stored(gw, before, 1)
            assert _send(client, keys["c"], "chat", body)[0].headers["x-costgate-cache"] == "hit"
            other, _ = _send(client, keys["a"], "chat", body)
        assert other.status_code == 200 and other.headers["x-costgate-cache"] == "miss"
        # /metrics' hits are the ledger's cache_hit rows (the dashboard's cache savings);
        # both count this test's hit once its row is written, so wait for that row too
        deadline = time.monotonic() + 30
        while True:
            rows = hit_rows(conn)
            hits = _run(_metrics(gw, 'costgate_cache_lookups_total{result="hit"}', rows))
            if (rows > earlier and hits == rows) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    assert rows > earlier and hits == rows


def test_on_4_replicas_20_sends_of_one_request_give_19_hits(
    shared_gateway: RunningGateway, keys: dict[str, str]
) -> None:
    gw = shared_gateway
    scaled = gw.run_cli("scale", "4", "--config", str(gw.config_path), timeout=400)
    assert scaled.returncode == 0, scaled.stdout + scaled.stderr
    _twenty_repeats_give_19_hits(gw, keys["a"], 4)


def test_with_the_shared_store_cut_mid_run_every_request_is_answered(
    shared_gateway: RunningGateway, keys: dict[str, str]
) -> None:
    gw, key = shared_gateway, keys["a"]
    stored, fresh = _body(), _body()
    answers: list[httpx.Response] = []
    with gw.client() as client:
        before = _held(gw)
        answers.append(_send(client, key, "chat", stored)[0])
        _stored(gw, before, 1)
        errors = _run(_metrics(gw, 'costgate_cache_skips_total{reason="error"}', 0))
        gw.db_proxy.block()  # the database (cache and ledger) away: connections reset
        try:
            for i in range(20):
                body = stored if i % 2 else fresh
                resp, events = _send(client, key, "chat", body, stream=i % 3 == 0)
                answers.append(resp)
                assert resp.status_code == 200, resp.text
                assert i % 3 or events[-1] == "data: [DONE]"
        finally:
            gw.db_proxy.unblock()
    assert all(a.status_code == 200 for a in answers)
    assert {a.headers["x-costgate-cache"] for a in answers} <= {"hit", "miss"}
    assert _run(_metrics(gw, 'costgate_cache_skips_total{reason="error"}', errors + 1)) > errors


def _streamed_text(api: str, lines: list[str]) -> str:
    """The text a stream carried, joined from its events' deltas."""
    return "".join(_deltas(api, lines))


def _deltas(api: str, lines: list[str]) -> list[str]:
    """The non-empty text deltas of a stream, in order."""
    out: list[str] = []
    for line in lines:
        if not line.startswith("data: {"):
            continue
        e = json.loads(line[len("data: "):])
        if api == "chat":
            out += [c["delta"].get("content") or "" for c in e.get("choices") or []]
        elif api == "completions":
            out += [c.get("text") or "" for c in e.get("choices") or []]
        elif api == "responses" and e.get("type") == "response.output_text.delta":
            out.append(e["delta"])
        elif api == "messages" and e.get("type") == "content_block_delta":
            out.append(e["delta"].get("text") or "")
    return [d for d in out if d]


def _run(coro: Any) -> float:
    import asyncio

    return float(asyncio.run(coro))
