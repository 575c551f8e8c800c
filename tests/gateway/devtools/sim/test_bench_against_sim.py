"""`costgate bench` against the real sim: the sim plays both targets here."""

import json

import httpx
import pytest

from gateway.cli.main import main as costgate
from gateway.devtools.bench import (
    BenchError,
    Load,
    Target,
    has_first_token,
    resolve_direct_target,
    run_bench,
)
from gateway.domain.config import load_config


@pytest.mark.parametrize(("sse", "first"), [
    (b'data: {"choices":[{"delta":{"role":"assistant","content":"","refusal":null}}]}', False),
    (b'data: {"choices":[{"delta":{"content":" the"}}]}', True),
    (b'data: {"choices": [{"delta": {"content": " spaced"}}]}', True),
    (b'data: {"choices":[{"delta":{"content":null,"tool_calls":[]}}]}', False),
    (b'{"tool_calls":[{"index":0,"function":{"arguments":"{\\"q"}}]}', True),
])
def test_time_to_first_token_waits_for_real_content(sse, first):
    assert has_first_token(sse) is first


def test_direct_target_resolves_public_name_to_provider_url_and_upstream_id(sim):
    config = load_config(sim.config_path)
    target = resolve_direct_target(config, "deepseek-v3.2")
    assert target.base_url == sim.provider_url("deepseek")
    assert target.model == "deepseek-chat"
    moved = resolve_direct_target(config, "relay-gpt-4.1", sim_url="http://127.0.0.1:1")
    assert moved.url == "http://127.0.0.1:1/relay/v1/chat/completions"


def test_an_alias_or_unknown_model_has_no_direct_target(sim):
    config = load_config(sim.config_path)
    with pytest.raises(BenchError, match="alias"):
        resolve_direct_target(config, "auto")
    with pytest.raises(BenchError, match="unknown"):
        resolve_direct_target(config, "gpt-9")


async def test_bench_is_bounded_by_count_and_counts_errors(sim):
    sim.set_fault("gpt-4o-mini", "error_503", probability=1.0, count=5)
    target = Target("direct", sim.provider_url("openai"), "gpt-4o-mini")
    (summary,) = await run_bench([target], Load(requests=40, concurrency=4, warmup=0))
    assert summary.requests == 40
    assert summary.error_kinds == {"http_503": 5}
    assert summary.latency_ms["p50"] > 0
    assert sim.stats()["requests"]["gpt-4o-mini"] == 40


async def test_streaming_bench_measures_time_to_first_token(sim):
    sim.set_behaviour("gpt-4o-mini", ttft_ms=30, per_token_ms=5, jitter=0,
                      completion_tokens=[20, 20])
    target = Target("direct", sim.provider_url("openai"), "gpt-4o-mini")
    load = Load(requests=8, concurrency=2, stream=True, warmup=0)
    (summary,) = await run_bench([target], load)
    assert summary.errors == 0
    assert 30 <= summary.ttft_ms["p50"] < summary.latency_ms["p50"]


async def test_bench_is_bounded_by_time(sim):
    sim.set_behaviour("gpt-4o-mini", ttft_ms=100, per_token_ms=0, jitter=0)
    target = Target("direct", sim.provider_url("openai"), "gpt-4o-mini")
    load = Load(requests=10_000, duration_s=0.5, concurrency=2, warmup=0, rounds=1)
    (summary,) = await run_bench([target], load)
    assert 2 <= summary.requests <= 20


def test_bench_command_prints_both_targets_and_the_overhead_as_json(sim, capsys):
    code = costgate(["bench", "--config", str(sim.config_path), "--model", "gpt-4.1",
                     "--gateway", sim.provider_url("openai"), "--requests", "20",
                     "--concurrency", "2", "--warmup", "2", "--json"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report["targets"]) == {"direct", "gateway"}
    assert report["targets"]["gateway"]["requests"] == 20
    assert set(report["overhead_ms"]["latency_ms"]) == {"p50", "p95", "p99", "mean"}


def test_bench_command_table_and_bad_arguments(sim, capsys):
    assert costgate(["bench", "--config", str(sim.config_path), "--targets", "direct",
                     "--requests", "5", "--warmup", "0", "--stream"]) == 0
    out = capsys.readouterr().out
    assert "ttft p50" in out and "direct" in out
    assert costgate(["bench", "--config", str(sim.config_path), "--model", "auto"]) == 2
    assert costgate(["bench", "--targets", "elsewhere"]) == 2


def test_bench_can_fix_the_sims_latency_for_the_run_and_restores_it(sim, capsys):
    code = costgate(["bench", "--config", str(sim.config_path), "--model", "gpt-4.1",
                     "--gateway", sim.provider_url("openai"), "--requests", "4",
                     "--warmup", "0", "--upstream-ms", "150,0", "--json"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    for target in report["targets"].values():
        assert target["latency_ms"]["p50"] >= 150
    restored = httpx.get(sim.base_url + "/_sim/behaviour").json()["models"]["gpt-4.1"]
    assert restored["ttft_ms"] == 5
    assert costgate(["bench", "--config", str(sim.config_path), "--upstream-ms", "-1"]) == 2
