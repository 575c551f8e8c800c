"""The gateway as deployed: Ray Serve, 2 replicas, the sim upstream, the PostgreSQL ledger,
spoken to with the official openai SDK; and its keys: scoped, expired, revoked, admin."""

from __future__ import annotations

import datetime as dt
import time

import httpx
import openai
import pytest
from sqlalchemy import create_engine, text

from db.keys import create_key, revoke_key

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


def replica_pid(gateway) -> int:
    """The PID of whichever replica answers: only an admin key may ask."""
    r = httpx.get(gateway.base_url + "/costgate/routing", timeout=10,
                  headers={"authorization": f"Bearer {gateway.admin_key}"})
    assert r.status_code == 200, r.text
    return r.json()["pid"]


def test_two_replicas_serve_requests(gateway):
    pids = {replica_pid(gateway) for _ in range(40)}
    assert len(pids) == 2


def models_status(gateway, key: str) -> int:
    # /v1/models authenticates like a completion but costs no upstream call and no row;
    # a new connection each time, so that Serve's proxy spreads them over the replicas
    return httpx.get(gateway.base_url + "/v1/models", timeout=10,
                     headers={"authorization": f"Bearer {key}"}).status_code


def accepted_everywhere(gateway, key: str) -> None:
    """Wait until both replicas know a new key: each loads one on a miss, but at most
    once per 2 s, and otherwise on its next refresh."""
    streak, deadline = 0, time.monotonic() + 30
    while streak < 20:
        assert time.monotonic() < deadline, "the new key was never accepted everywhere"
        streak = streak + 1 if models_status(gateway, key) == 200 else 0


def test_a_revoked_key_is_refused_by_every_replica_within_5_s(gateway):
    # an admin key, so that each answer names the replica that gave it
    key, listing = create_key(gateway.database_url, "revoke-me", "qa", is_admin=True)
    url = gateway.base_url + "/costgate/routing"

    def probe() -> tuple[int, int | None]:
        r = httpx.get(url, timeout=10, headers={"authorization": f"Bearer {key}"})
        return r.status_code, r.json().get("pid") if r.status_code == 200 else None

    accepted_everywhere(gateway, key)
    assert {probe()[1] for _ in range(40)} == {replica_pid(gateway) for _ in range(40)}
    revoke_key(gateway.database_url, str(listing.key_id))
    revoked_at = time.monotonic()
    # 30 refusals in a row: the sequence of requests that reached both replicas above
    last_accepted: dict[int, float] = {}
    refusals = 0
    while refusals < 30:
        assert time.monotonic() - revoked_at < 15, f"still accepted by {set(last_accepted)}"
        status, pid = probe()
        assert status in (200, 401), status
        if pid is not None:
            last_accepted[pid] = time.monotonic()
            refusals = 0
        else:
            refusals += 1
    assert all(at - revoked_at <= 5.0 for at in last_accepted.values()), last_accepted
    assert models_status(gateway, key) == 401
    with pytest.raises(openai.AuthenticationError):
        client(gateway, key).chat.completions.create(model="auto", messages=MESSAGES)


def test_missing_unknown_and_expired_keys_are_401s(gateway):
    for headers in ({}, {"authorization": "Bearer cg-unknown"}):
        r = httpx.post(gateway.base_url + "/v1/chat/completions", headers=headers, timeout=30,
                       json={"model": "auto", "messages": MESSAGES})
        assert r.status_code == 401, headers
        assert r.json()["error"]["type"] == "authentication_error"
        assert httpx.get(gateway.base_url + "/v1/models", headers=headers).status_code == 401
    expired, _ = create_key(gateway.database_url, "expired-app",
                            expires_at=dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1))
    # until a replica has loaded it, it is an unknown key: a 401 too, without the reason
    deadline = time.monotonic() + 15
    while True:
        r = httpx.post(gateway.base_url + "/v1/chat/completions", timeout=30,
                       headers={"authorization": f"Bearer {expired}"},
                       json={"model": "auto", "messages": MESSAGES})
        assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
        if "expired" in r.json()["error"]["message"]:
            break
        assert time.monotonic() < deadline, "no replica ever said the key had expired"
        time.sleep(0.5)


def test_a_scoped_key_is_held_to_its_models_and_caps_and_each_refusal_is_recorded(gateway, sim):
    key, listing = create_key(gateway.database_url, "scoped-e2e", "qa",
                              allowed_models=["fast"], max_n=1)
    accepted_everywhere(gateway, key)
    scoped = client(gateway, key)
    assert scoped.chat.completions.create(model="fast", messages=MESSAGES).choices
    assert {m.id for m in scoped.models.list()} == {"fast"}
    with pytest.raises(openai.PermissionDeniedError) as info:
        scoped.chat.completions.with_raw_response.create(model="gpt-4.1", messages=MESSAGES)
    assert info.value.code == "model_not_allowed"
    refused = info.value.response.headers["x-costgate-request-id"]
    with pytest.raises(openai.PermissionDeniedError):
        scoped.chat.completions.create(model="fast", messages=MESSAGES,
                                       extra_headers={"x-costgate-model": "gpt-4.1"})
    with pytest.raises(openai.BadRequestError) as capped:
        scoped.chat.completions.create(model="fast", messages=MESSAGES, n=2)
    assert capped.value.param == "n"
    row = ledger_row(gateway, refused)
    assert row["app"] == "scoped-e2e" and row["key_id"] == listing.key_id
    assert (row["http_status"], row["status"], row["error_class"]) == (
        403, "client_error", "model_not_allowed")
    assert row["requested_model"] == "gpt-4.1" and row["model"] is None


def test_routing_info_refuses_an_app_key_and_answers_an_admin_key(gateway):
    url = gateway.base_url + "/costgate/routing"
    assert httpx.get(url).status_code == 401
    app = httpx.get(url, headers={"authorization": f"Bearer {gateway.api_key}"})
    assert app.status_code == 403 and app.json()["error"]["code"] == "admin_key_required"
    assert isinstance(replica_pid(gateway), int)
    assert "pid" not in httpx.get(gateway.base_url + "/healthz").json()
