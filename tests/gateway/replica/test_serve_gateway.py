"""The gateway as deployed: Ray Serve, 2 replicas, the sim upstream, the PostgreSQL ledger,
spoken to with the official openai SDK."""

from __future__ import annotations

import time

import httpx
import openai
import pytest
from sqlalchemy import create_engine, text

MESSAGES = [{"role": "user", "content": "Write two sentences about harbours."}]

pytestmark = pytest.mark.ray


def client(gateway, key: str | None = None) -> openai.OpenAI:
    return openai.OpenAI(base_url=gateway.base_url + "/v1", api_key=key or gateway.api_key,
                         max_retries=0)


def ledger_row(gateway, request_id: str, timeout: float = 10.0):
    engine = create_engine(gateway.database_url)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            with engine.connect() as conn:
                row = conn.execute(
                    text("SELECT * FROM usage_records WHERE request_id = :id"), {"id": request_id}
                ).mappings().first()
            if row is not None:
                return row
            time.sleep(0.1)
    finally:
        engine.dispose()
    raise AssertionError(f"no ledger row for {request_id}")


def test_sdk_completion_is_answered_and_recorded_for_the_keys_app(gateway, sim):
    raw = client(gateway).chat.completions.with_raw_response.create(
        model="auto", messages=MESSAGES)
    completion = raw.parse()
    assert completion.model == "auto" and completion.choices[0].message.content
    row = ledger_row(gateway, raw.headers["x-costgate-request-id"])
    assert row["app"] == "tests" and row["team"] == "qa"
    assert row["model"] == raw.headers["x-costgate-model"]
    assert row["prompt_tokens"] == completion.usage.prompt_tokens
    assert row["completion_tokens"] == completion.usage.completion_tokens
    assert row["usage_source"] == "provider" and row["actual_cost_usd"] > 0


def test_stream_chunks_arrive_incrementally(gateway, sim):
    # 40 tokens at 50 ms each: the whole stream takes about 2 s at the sim
    sim.set_behaviour("gpt-4o", ttft_ms=20, per_token_ms=50, completion_tokens=[40, 40],
                      jitter=0)
    started = time.monotonic()
    arrivals = []
    stream = client(gateway).chat.completions.create(model="gpt-4o", messages=MESSAGES,
                                                     stream=True)
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            arrivals.append(time.monotonic() - started)
    total = time.monotonic() - started
    assert len(arrivals) >= 30
    assert total > 1.5
    assert arrivals[0] < total / 4, (arrivals[0], total)  # not buffered until the end
    assert arrivals[len(arrivals) // 2] < total * 0.8


def test_models_list_holds_models_and_aliases(gateway):
    ids = {m.id for m in client(gateway).models.list()}
    assert {"auto", "fast", "balanced", "budget", "code"} <= ids
    assert {m.name for m in gateway.cfg.models} <= ids


def test_errors_map_to_the_sdks_exceptions(gateway, sim):
    with pytest.raises(openai.NotFoundError):
        client(gateway).chat.completions.create(model="no-such-model", messages=MESSAGES)
    with pytest.raises(openai.BadRequestError):
        client(gateway).chat.completions.create(model="auto", messages=[])
    with pytest.raises(openai.AuthenticationError):
        client(gateway, key="cg-wrong").chat.completions.create(model="auto", messages=MESSAGES)
    r = httpx.post(gateway.base_url + "/v1/chat/completions", content=b"{oops",
                   headers={"authorization": f"Bearer {gateway.api_key}"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_json"
    r = httpx.post(gateway.base_url + "/v1/chat/completions", json={"model": "auto"})
    assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"


def test_upstream_503_is_a_502_in_openai_shape_without_secrets(gateway, sim):
    sim.set_fault("gpt-4o", "error_503")
    r = httpx.post(
        gateway.base_url + "/v1/chat/completions",
        json={"model": "gpt-4o", "messages": MESSAGES},
        headers={"authorization": f"Bearer {gateway.api_key}"},
        timeout=60,
    )
    assert r.status_code == 502
    assert set(r.json()["error"]) == {"message", "type", "param", "code"}
    assert gateway.provider_secret not in r.text
    assert sim.stats()["with_bearer"]["gpt-4o"] >= 1  # the key went upstream, and only there


def test_client_disconnect_mid_stream_leaves_no_upstream_stream_open(gateway, sim):
    sim.set_behaviour("gpt-4o", ttft_ms=5, per_token_ms=40, completion_tokens=[300, 300])
    with httpx.stream(
        "POST",
        gateway.base_url + "/v1/chat/completions",
        json={"model": "gpt-4o", "messages": MESSAGES, "stream": True},
        headers={"authorization": f"Bearer {gateway.api_key}"},
        timeout=30,
    ) as r:
        request_id = r.headers["x-costgate-request-id"]
        lines = r.iter_lines()
        for _ in range(8):
            next(lines)
        assert sim.stats()["streams_open"] == 1
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and sim.stats()["streams_open"]:
        time.sleep(0.05)
    assert sim.stats()["streams_open"] == 0
    row = ledger_row(gateway, request_id)
    assert row["status"] == "cancelled" and row["usage_source"] == "estimated"
    assert 0 < row["completion_tokens"] < 300 and row["actual_cost_usd"] > 0


def test_two_replicas_serve_requests(gateway):
    pids = {httpx.get(gateway.base_url + "/healthz").json()["pid"] for _ in range(40)}
    assert len(pids) == 2
