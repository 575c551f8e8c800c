"""The demo's traffic generator, run briefly against the real sim (same API as the gateway)."""

import asyncio
import random
import threading
import time
import uuid
from collections import Counter

from sqlalchemy import create_engine, text

from db.keys import create_key
from gateway.devtools.traffic import (
    DEFAULT_ALIASES,
    completion_models,
    default_models,
    embedding_models,
    plan_call,
    run_traffic,
)
from gateway.domain.config import default_config_path, load_config

SIM_MODELS = ["gpt-4o-mini", "deepseek-chat", "gemini-2.5-flash"]
ATTRIBUTION_PARAMS = ("user", "metadata")


def test_default_mix_covers_every_alias_and_concrete_models(sim):
    names = default_models(load_config(sim.config_path))
    assert set(DEFAULT_ALIASES) <= set(names)
    assert "deepseek-v3.2" in names and "gpt-4.1" in names


def test_planned_calls_mix_sizes_streams_usage_requests_models_and_keys():
    rng = random.Random(5)
    calls = [plan_call(rng, ["auto", "fast", "gpt-4.1"], keys=3) for _ in range(2000)]
    assert {c.kind for c in calls} == {"short", "paragraph", "long"}
    streams = [c for c in calls if c.stream]
    assert 0.25 < len(streams) / len(calls) < 0.45
    assert any(c.include_usage for c in streams) and not all(c.include_usage for c in streams)
    assert not any(c.include_usage for c in calls if not c.stream)
    assert any(c.abandon_after for c in streams)
    assert {c.model for c in calls} == {"auto", "fast", "gpt-4.1"}
    assert {c.key_index for c in calls} == {0, 1, 2}
    assert any(c.tools for c in calls) and any(c.priority for c in calls)


async def test_traffic_stops_at_its_request_bound_and_sends_a_mix(sim):
    summary = await run_traffic(sim.base_url + "/v1", ["key-app-a", "key-app-b"],
                                models=SIM_MODELS, max_requests=60, concurrency=4, seed=11)
    assert summary.sent == 60
    assert summary.ok + summary.cancelled == 60 and not summary.errors
    assert set(summary.models) == set(SIM_MODELS)
    assert 0 < summary.streams < 60
    assert set(summary.kinds) == {"short", "paragraph", "long"}
    stats = sim.stats()
    assert stats["total"] == 60
    assert len(stats["bearer_sha256"]) == 2  # both apps' keys were used
    assert sum(stats["streams"].values()) == summary.streams


async def test_traffic_defaults_to_the_configs_names_and_reports_progress(sim):
    lines = []
    config = load_config(sim.config_path)
    summary = await run_traffic(sim.base_url + "/v1", ["k"], config, max_requests=20,
                                log_every=10, on_progress=lines.append, seed=3)
    assert summary.sent == 20
    assert set(summary.models) <= set(default_models(config)) | set(embedding_models(config))
    # the sim knows upstream ids only: aliases and other public names are 404s there
    upstream_ids = {m.upstream_model for m in config.models}
    unknown = sum(n for m, n in summary.models.items() if m not in upstream_ids)
    assert summary.errors == {"NotFoundError(404)": unknown}
    assert len(lines) == 3 and lines[-1].startswith("traffic: 20 sent, ")


async def test_traffic_stops_at_its_time_bound(sim):
    sim.set_behaviour("gpt-4o-mini", ttft_ms=50, per_token_ms=0)
    started = time.monotonic()
    summary = await run_traffic(sim.base_url + "/v1", models=["gpt-4o-mini"],
                                max_requests=100_000, max_seconds=0.6, concurrency=2)
    assert time.monotonic() - started < 5
    assert 0 < summary.sent < 100


async def test_traffic_stops_when_its_event_is_set(sim):
    stop = asyncio.Event()
    asyncio.get_running_loop().call_later(0.5, stop.set)
    summary = await run_traffic(sim.base_url + "/v1", models=["gpt-4o-mini"],
                                max_requests=100_000, max_seconds=60, concurrency=2,
                                stop_event=stop)
    assert 0 < summary.sent < 100_000


async def test_traffic_paces_itself_and_obeys_a_thread_event(sim):
    stop = threading.Event()
    threading.Timer(1.0, stop.set).start()
    summary = await run_traffic(sim.base_url + "/v1", models=["gpt-4o-mini"],
                                max_requests=1000, max_seconds=30, concurrency=4,
                                rate_per_s=10, stop_event=stop)
    assert 3 <= summary.sent <= 15  # about 10 requests in one second


async def test_traffic_counts_errors_and_keeps_going(sim):
    sim.set_fault("deepseek-chat", "error_503")
    summary = await run_traffic(sim.base_url + "/v1", models=["deepseek-chat"],
                                max_requests=10, concurrency=2)
    assert summary.sent == 10
    # each SDK names the 503 its own way (openai's InternalServerError, anthropic's
    # ServiceUnavailableError); every call failed with it
    assert sum(summary.errors.values()) == 10
    assert all(name.endswith("(503)") for name in summary.errors)


def test_the_mix_uses_every_api_and_embeds_only_on_embedding_models():
    rng = random.Random(5)
    calls = [plan_call(rng, ["auto", "gpt-4.1"], 2, ["text-embedding-3-small"])
             for _ in range(2000)]
    endpoints = {c.endpoint for c in calls}
    assert endpoints == {"chat.completions", "responses", "completions", "embeddings",
                         "messages"}
    embeds = [c for c in calls if c.endpoint == "embeddings"]
    assert all(c.model == "text-embedding-3-small" and not c.stream for c in embeds)
    assert all(c.model != "text-embedding-3-small" for c in calls if c not in embeds)


async def test_traffic_through_the_sim_succeeds_on_every_api(sim):
    config = load_config(sim.config_path)  # its embedding model, for the embeddings
    summary = await run_traffic(sim.base_url + "/v1", ["k"], config, models=["gpt-4o-mini"],
                                max_requests=120, concurrency=4, seed=3, log_every=0)
    assert set(summary.models) == {"gpt-4o-mini", "text-embedding-3-small"}
    assert set(summary.endpoints) == {"chat.completions", "responses", "completions",
                                      "embeddings", "messages"}
    assert sum(summary.errors.values()) == 0, summary.errors


def test_legacy_completions_go_only_to_the_names_that_serve_them():
    config = load_config(default_config_path())
    serving = completion_models(config)
    chat_only = [m.name for m in config.models if m.kind == "chat" and m.name not in serving]
    assert chat_only and "auto" in serving  # Anthropic's and Gemini's models do not
    rng = random.Random(8)
    names = default_models(config)
    calls = [plan_call(rng, names, 2, embedding_models(config), None, serving)
             for _ in range(3000)]
    completions = [c for c in calls if c.endpoint == "completions"]
    assert len(completions) > 100 and all(c.model in serving for c in completions)
    assert any(c.model in chat_only for c in calls)  # on the other APIs, every model


async def test_traffic_sends_end_users_sessions_and_features_on_every_api(sim):
    config = load_config(sim.config_path)
    lines = []
    summary = await run_traffic(sim.base_url + "/v1", ["k1", "k2", "k3"], config,
                                models=["gpt-4o-mini"], max_requests=100, concurrency=4,
                                seed=21, log_every=0, on_progress=lines.append)
    assert sum(summary.errors.values()) == 0, summary.errors
    seen = sim.recent_requests()
    assert len(seen) == 100
    headers = Counter(h for r in seen for h in r["header_names"] if h.startswith("x-costgate"))
    assert headers["x-costgate-session"] > 60  # all but the internal jobs
    assert 10 < headers["x-costgate-user"] < 60  # the rest put the end user in the body
    assert headers["x-costgate-tags"] > 10  # the APIs without OpenAI `metadata`
    params = Counter(p for r in seen for p in r["params"] if p in ATTRIBUTION_PARAMS)
    assert params["user"] > 20 and params["metadata"] > 40
    # each OpenAI call carries its tags one way, `metadata` or the header; Anthropic's
    # Messages in the header (its `metadata` holds only the end user)
    for r in seen:
        anthropic = "anthropic-version" in r["header_names"]
        tags_in_body = "metadata" in r["params"] and not anthropic
        assert tags_in_body != ("x-costgate-tags" in r["header_names"]), r
    assert summary.audience is not None and summary.audience.sessions > 5
    assert " end users, " in lines[-1] and lines[-1].endswith(" sessions")


async def test_the_demo_mix_through_the_gateway_fails_nowhere_and_is_attributed(gateway):
    app = f"traffic-{uuid.uuid4().hex[:8]}"
    key, _ = create_key(gateway.database_url, app, "demo")
    names = default_models(load_config(default_config_path()))  # what the demo sends
    summary = await run_traffic(gateway.base_url + "/v1", [key], gateway.cfg, models=names,
                                max_requests=160, concurrency=4, seed=5, log_every=0)
    assert summary.errors == Counter(), summary.errors
    assert summary.endpoints["completions"] > 0
    engine = create_engine(gateway.database_url)
    query = text("SELECT end_user, session_id, tags, endpoint FROM usage_records"
                 " WHERE app = :app")
    deadline = time.monotonic() + 60
    while True:
        with engine.connect() as conn:
            rows = conn.execute(query, {"app": app}).all()
        if len(rows) >= summary.sent or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.2)
    engine.dispose()
    assert len(rows) == summary.sent
    assert all(r.tags and r.tags["feature"] and r.tags["env"] for r in rows)
    customers = [r for r in rows if r.end_user]
    assert 0.8 < len(customers) / len(rows) < 1
    assert all(r.session_id and r.tags["plan"] for r in customers)
    assert {r.end_user for r in customers} == summary.audience.end_users
    # every API carried them: the headers, `user`, `metadata`, Anthropic's metadata
    assert {r.endpoint for r in customers} >= {"chat.completions", "responses", "messages"}
