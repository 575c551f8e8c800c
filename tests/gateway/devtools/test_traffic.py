"""The demo's traffic generator, run briefly against the real sim (same API as the gateway)."""

import asyncio
import random
import threading
import time

from gateway.devtools.traffic import (
    DEFAULT_ALIASES,
    default_models,
    embedding_models,
    plan_call,
    run_traffic,
)
from gateway.domain.config import load_config

SIM_MODELS = ["gpt-4o-mini", "deepseek-chat", "gemini-2.5-flash"]


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
