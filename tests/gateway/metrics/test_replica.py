import asyncio
from decimal import Decimal

import pytest

from gateway.domain.endpoints import Endpoint
from gateway.domain.usage_record import RequestStatus, UsageSource
from gateway.metrics.hub import HubState
from gateway.metrics.replica import LocalHubClient, ReplicaMetrics, render_metrics
from tests.fixtures.exposition_reader import samples, total
from tests.fixtures.metric_records import make_record


def _replica(hub: LocalHubClient, name: str = "r1", **kw) -> ReplicaMetrics:
    return ReplicaMetrics(name, "costgate", hub=hub, **kw)


async def test_requests_tokens_and_money_from_two_replicas_add_up():
    hub = LocalHubClient()
    a, b = _replica(hub, "r1"), _replica(hub, "r2")
    a.observe_request(make_record())
    a.observe_request(make_record(stream=True, ttft_ms=180))
    b.observe_request(make_record(model="gpt-4.1", provider="openai", alias=None))
    await a.push()
    await b.push()
    text = await hub.render()
    assert total(text, "costgate_requests_total") == 3
    assert total(text, "costgate_requests_total", model="deepseek-v3.2", alias="auto") == 2
    assert total(text, "costgate_tokens_total", kind="prompt") == 300
    assert total(text, "costgate_tokens_total", kind="cached_prompt") == 60
    assert total(text, "costgate_tokens_total", kind="completion") == 150
    assert total(text, "costgate_cost_usd_total") == pytest.approx(3 * 0.0000512)
    assert total(text, "costgate_request_duration_seconds_count") == 3
    assert total(text, "costgate_time_to_first_token_seconds_count") == 1


async def test_requests_are_counted_by_the_api_they_called():
    hub = LocalHubClient()
    r = _replica(hub)
    r.observe_request(make_record())
    r.observe_request(make_record(endpoint=Endpoint.EMBEDDINGS, completion_tokens=0))
    r.observe_request(make_record(endpoint=Endpoint.RESPONSES))
    await r.push()
    text = await hub.render()
    for endpoint in ("chat.completions", "embeddings", "responses"):
        assert total(text, "costgate_requests_total", endpoint=endpoint) == 1


async def test_a_batch_line_counts_its_request_and_cost_but_no_latency():
    hub = LocalHubClient()
    r = _replica(hub)
    r.observe_request(make_record(endpoint=Endpoint.BATCH, latency_ms=3_600_000))
    await r.push()
    text = await hub.render()
    assert total(text, "costgate_requests_total", endpoint="batch") == 1
    assert total(text, "costgate_cost_usd_total") == pytest.approx(0.0000512)
    assert total(text, "costgate_request_duration_seconds_count") == 0


async def test_savings_are_split_so_both_counters_only_grow():
    hub = LocalHubClient()
    r = _replica(hub)
    # the relay billing below list price, then the relay's DeepSeek above it
    r.observe_request(make_record(actual_cost_usd=Decimal("1.0959"), list_cost_usd=Decimal("8")))
    r.observe_request(make_record(actual_cost_usd=Decimal("0.5"), list_cost_usd=Decimal("0.42")))
    await r.push()
    text = await hub.render()
    assert total(text, "costgate_savings_usd_total") == pytest.approx(6.9041)
    assert total(text, "costgate_negative_savings_usd_total") == pytest.approx(0.08)
    net = total(text, "costgate_savings_usd_total") - total(
        text, "costgate_negative_savings_usd_total"
    )
    listed = total(text, "costgate_list_cost_usd_total")
    billed = total(text, "costgate_cost_usd_total")
    assert net == pytest.approx(listed - billed)


async def test_unknown_cost_is_counted_as_unpriced_never_as_zero_dollars():
    hub = LocalHubClient()
    r = _replica(hub)
    r.observe_request(
        make_record(
            actual_cost_usd=None,
            list_cost_usd=None,
            baseline_cost_usd=None,
            prompt_tokens=None,
            completion_tokens=None,
            cached_prompt_tokens=None,
            usage_source=UsageSource.MISSING,
        )
    )
    await r.push()
    text = await hub.render()
    assert total(text, "costgate_unpriced_requests_total") == 1
    assert not [s for s in samples(text) if s[0] == "costgate_cost_usd_total"]


async def test_errors_and_cancellations_get_their_status_class_and_reason():
    hub = LocalHubClient()
    r = _replica(hub)
    r.observe_request(
        make_record(
            status=RequestStatus.UPSTREAM_ERROR,
            http_status=502,
            error_class="upstream_5xx",
            actual_cost_usd=None,
            list_cost_usd=None,
        )
    )
    r.observe_request(make_record(status=RequestStatus.CANCELLED, stream=True))
    r.observe_request(
        make_record(
            status=RequestStatus.CLIENT_ERROR,
            http_status=404,
            error_class="model_not_found",
            model=None,
            provider=None,
        )
    )
    await r.push()
    text = await hub.render()
    assert total(text, "costgate_requests_total", status_class="5xx") == 1
    assert total(text, "costgate_requests_total", status_class="cancelled") == 1
    assert total(text, "costgate_requests_total", status_class="4xx", model="") == 1
    assert total(text, "costgate_request_errors_total", reason="upstream_5xx") == 1
    assert total(text, "costgate_request_errors_total", reason="model_not_found") == 1
    assert total(text, "costgate_request_errors_total") == 2


async def test_per_app_label_can_be_turned_off(monkeypatch):
    monkeypatch.setenv("COSTGATE_METRICS_APP_LABEL", "0")
    hub = LocalHubClient()
    r = _replica(hub)
    r.observe_request(make_record(app="billing"))
    r.observe_request(make_record(app="search"))
    await r.push()
    text = await hub.render()
    apps = {labels.get("app") for n, labels, _ in samples(text) if n == "costgate_requests_total"}
    assert apps == {""}
    assert total(text, "costgate_requests_total") == 2


async def test_free_text_and_unbounded_label_values_become_other():
    hub = LocalHubClient()
    r = _replica(hub)
    r.observe_attempt("gpt-4.1", "openai", "error: connection reset by peer")
    for i in range(250):
        r.observe_retry("gpt-4.1", "openai", f"reason_{i}")
    await r.push()
    text = await hub.render()
    assert total(text, "costgate_upstream_attempts_total", outcome="other") == 1
    reasons = {labels["reason"] for n, labels, _ in samples(text) if n == "costgate_retries_total"}
    assert len(reasons) <= 201
    assert "other" in reasons


async def test_resilience_events_and_gauges_are_exported():
    hub = LocalHubClient()
    r = _replica(hub)
    r.observe_attempt("gpt-4.1", "openai", "rate_limited")
    r.observe_attempt("gpt-4.1", "openai", "ok")
    r.observe_retry("gpt-4.1", "openai", "rate_limited")
    r.observe_fallback("gpt-4.1", "relay-gpt-4.1")
    r.set_breaker_state("openai", "gpt-4.1", 1)
    r.set_routing_weights({"auto": {"deepseek-v3.2": Decimal(60), "gemini-2.5-flash": Decimal(40)}})
    r.inflight_delta(1)
    r.inflight_delta(1)
    r.inflight_delta(-1)
    r.set_writer_stats(
        {
            "queued": 10,
            "written": 8,
            "spooled": 2,
            "dropped": 0,
            "buffer_depth": 2,
            "spool_depth": 2,
            "not_a_stat": 5,
        }
    )
    await r.push()
    text = await hub.render()
    assert total(text, "costgate_upstream_attempts_total") == 2
    assert total(text, "costgate_retries_total", reason="rate_limited") == 1
    assert total(text, "costgate_fallbacks_total", from_model="gpt-4.1") == 1
    assert total(text, "costgate_circuit_breaker_state", model="gpt-4.1") == 1
    assert total(text, "costgate_routing_weight", alias="auto", model="deepseek-v3.2") == 60
    assert total(text, "costgate_requests_in_flight") == 1
    assert total(text, "costgate_record_writer_written_rows_total") == 8
    assert total(text, "costgate_record_writer_spool_rows") == 2


async def test_writer_counts_are_cumulative_so_repeated_stats_do_not_add_up():
    hub = LocalHubClient()
    r = _replica(hub)
    r.set_writer_stats({"written": 5})
    await r.push()
    r.set_writer_stats({"written": 7})
    await r.push()
    assert total(await hub.render(), "costgate_record_writer_written_rows_total") == 7


async def test_the_writers_troubles_are_exported_summed_over_replicas():
    hub = LocalHubClient()
    a, b = _replica(hub, "r1"), _replica(hub, "r2")
    a.set_writer_stats({"restarts": 2, "quarantined": 3, "spool_write_errors": 4, "spool_depth": 5})
    b.set_writer_stats({"restarts": 1, "quarantined": 0, "spool_write_errors": 6, "spool_depth": 7})
    await a.push()
    await b.push()
    text = await hub.render()
    assert total(text, "costgate_record_writer_restarts_total") == 3
    assert total(text, "costgate_record_writer_quarantined_lines_total") == 3
    assert total(text, "costgate_record_writer_spool_write_errors_total") == 10
    assert total(text, "costgate_record_writer_spool_rows") == 12
    assert "# TYPE costgate_record_writer_restarts_total counter" in text.decode()


def test_every_figure_a_record_writer_reports_is_exported_or_knowingly_not(tmp_path):
    from gateway.ledger.writer import RecordWriter
    from gateway.metrics.catalog import WRITER_STAT_METRICS

    stats = RecordWriter("postgresql://unused", spool_dir=tmp_path).stats()
    # replayed is part of written, flush errors show as spooled rows, adoption as spool rows,
    # journaled rows are the queued ones
    assert set(stats) - set(WRITER_STAT_METRICS) == {
        "replayed", "flush_errors", "adopted", "journaled"
    }
    assert set(WRITER_STAT_METRICS) <= set(stats)


async def test_nothing_is_pushed_while_nothing_changed():
    pushed = []

    class CountingHub(LocalHubClient):
        async def push(self, snap):
            pushed.append(snap.seq)
            return await super().push(snap)

    r = _replica(CountingHub(), heartbeat_s=3600)
    r.inflight_delta(1)
    await r.push()
    await r.push()
    await r.push()
    assert len(pushed) == 1
    r.inflight_delta(-1)
    await r.push()
    assert len(pushed) == 2


async def test_close_pushes_a_final_snapshot_so_gauges_vanish_and_counts_stay():
    hub = LocalHubClient(HubState())
    r = _replica(hub, push_interval_s=3600)
    await r.start()
    r.inflight_delta(1)
    r.observe_request(make_record())
    await r.close()
    text = await hub.render()
    assert total(text, "costgate_requests_total") == 1
    assert total(text, "costgate_requests_in_flight") == 0
    assert hub.state.sources() == {}


async def test_the_periodic_push_delivers_without_any_explicit_call():
    hub = LocalHubClient()
    r = _replica(hub, push_interval_s=0.01)
    await r.start()
    try:
        r.observe_request(make_record())
        for _ in range(200):
            if total(await hub.render(), "costgate_requests_total") == 1:
                break
            await asyncio.sleep(0.01)
        assert total(await hub.render(), "costgate_requests_total") == 1
    finally:
        await r.close()


async def test_render_metrics_pushes_this_processes_news_first():
    hub = LocalHubClient()
    r = _replica(hub, push_interval_s=3600)
    await r.start()
    try:
        r.observe_request(make_record())
        text = await render_metrics("costgate", hub=hub)
        assert total(text, "costgate_requests_total") == 1
    finally:
        await r.close()


async def test_without_ray_the_default_hub_refuses_instead_of_starting_a_cluster(monkeypatch):
    import ray

    import gateway.metrics.replica

    created = []
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(gateway.metrics.replica, "hub_handle", lambda app: created.append(app))
    r = ReplicaMetrics("r1", "costgate")
    r.observe_request(make_record())
    with pytest.raises(RuntimeError, match="not initialized"):
        await r.push()
    assert created == []
