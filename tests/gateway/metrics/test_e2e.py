"""/metrics on a real 2-replica gateway agrees with the ledger and with a real Prometheus.

Traffic goes out under a key of its own app, so the app-labelled counters can be
compared with the ledger rows of that app alone, whatever else the session sent; the
histograms (no app label) are compared as increases over this test.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from decimal import Decimal

import httpx
import pytest
from sqlalchemy import create_engine, text

from db.keys import create_key
from tests.fixtures.exposition_reader import total
from tests.fixtures.prometheus_server import prometheus_scraping

pytestmark = pytest.mark.ray

APP = "metrics-e2e"
# (model, stream, how many): mixed models, aliases, streams, and failures
PLAN = [
    ("deepseek-v3.2", False, 8),
    ("deepseek-v3.2", True, 6),
    ("auto", False, 8),
    ("auto", True, 6),
    ("gpt-4.1-mini", False, 6),  # rate-limited half the time: retries
    ("claude-haiku-4.5", True, 4),
    ("gpt-4o", False, 4),  # every attempt fails: 5xx
    ("no-such-model", False, 2),  # 404
]
N = sum(n for _, _, n in PLAN)


def _warm_up(base_url: str, key: str) -> int:
    """Send until every replica knows the new key; return how many requests got through.

    Replicas reload keys from the ledger every few seconds, each on its own clock. A
    refused request leaves no record and no metric; one that got through is counted
    like any other, so the caller adds the number returned to its totals.
    """
    body = {"model": "deepseek-v3.2", "messages": [{"role": "user", "content": "warm up"}]}
    through = streak = 0
    deadline = time.monotonic() + 60
    with httpx.Client(base_url=base_url, headers={"authorization": f"Bearer {key}"}) as c:
        while streak < 20:
            assert time.monotonic() < deadline, "the new gateway key was never accepted"
            status = c.post("/v1/chat/completions", json=body, timeout=30).status_code
            assert status in (200, 401), status
            through += status == 200
            streak = streak + 1 if status == 200 else 0
            if status == 401:
                time.sleep(0.5)
    return through


async def _send(base_url: str, key: str) -> list[int]:
    sem = asyncio.Semaphore(8)
    async with httpx.AsyncClient(
        base_url=base_url, headers={"authorization": f"Bearer {key}"}, timeout=60
    ) as client:

        async def one(model: str, stream: bool, i: int) -> int:
            body = {
                "model": model,
                "messages": [{"role": "user", "content": f"metrics check {i} " * (1 + i % 5)}],
                "stream": stream,
            }
            if stream and i % 2:
                body["stream_options"] = {"include_usage": True}
            async with sem:
                if not stream:
                    return (await client.post("/v1/chat/completions", json=body)).status_code
                async with client.stream("POST", "/v1/chat/completions", json=body) as r:
                    async for _ in r.aiter_bytes():
                        pass
                    return r.status_code

        jobs = [one(m, s, i) for m, s, n in PLAN for i in range(n)]
        return await asyncio.gather(*jobs)


def _ledger(database_url: str) -> dict[str, Decimal]:
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            row = conn.execute(
                text(
                    """
                    SELECT count(*) AS requests,
                           count(*) FILTER (WHERE http_status >= 500) AS failed,
                           count(ttft_ms) AS with_ttft,
                           coalesce(sum(latency_ms), 0) AS latency_ms,
                           coalesce(sum(prompt_tokens), 0) AS prompt,
                           coalesce(sum(cached_prompt_tokens), 0) AS cached_prompt,
                           coalesce(sum(completion_tokens), 0) AS completion,
                           coalesce(sum(actual_cost_usd), 0) AS cost,
                           coalesce(sum(list_cost_usd), 0) AS list_cost,
                           coalesce(sum(baseline_cost_usd), 0) AS baseline_cost,
                           coalesce(sum(list_cost_usd - actual_cost_usd), 0) AS net_savings
                    FROM usage_records WHERE app = :app
                    """
                ),
                {"app": APP},
            ).one()
    finally:
        engine.dispose()
    return {k: Decimal(v) for k, v in row._mapping.items()}


def _poll(fetch, ready, timeout_s: float = 40.0):
    deadline = time.monotonic() + timeout_s
    value = fetch()
    while not ready(value) and time.monotonic() < deadline:
        time.sleep(0.5)
        value = fetch()
    return value


def settled(scrape, timeout_s: float = 30.0) -> bytes:
    """The metrics once the shared gateway is idle: nothing in flight, and the request
    count unchanged over more than one push interval (1 s). Requests of the tests before
    this one (a traffic run's last streams) may still be landing: the histograms below
    have no app label to tell them apart."""
    last = scrape()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        time.sleep(1.5)
        now = scrape()
        idle = total(now, "costgate_requests_in_flight") == 0
        count = "costgate_request_duration_seconds_count"
        if idle and total(now, count) == total(last, count):
            return now
        last = now
    return last


def _cents_equal(metric: float, ledger: Decimal) -> bool:
    return round(Decimal(repr(metric)), 2) == round(ledger, 2) and abs(
        Decimal(repr(metric)) - ledger
    ) < Decimal("1e-9")


def test_metrics_totals_equal_the_ledger_and_prometheus_sees_the_same(gateway, sim, tmp_path):
    key, _ = create_key(gateway.database_url, APP, "ops")

    def scrape() -> bytes:
        r = httpx.get(f"{gateway.base_url}/metrics", timeout=10)
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/plain")
        return r.content

    before = settled(scrape)
    warm = _warm_up(gateway.base_url, key)
    n = N + warm
    sim.set_fault("gpt-4o", "error_503")
    sim.set_fault("gpt-4.1-mini", "rate_limit", 0.5, retry_after_s=0)
    statuses = asyncio.run(_send(gateway.base_url, key))
    assert statuses.count(404) == 2
    assert sum(1 for s in statuses if s >= 500) >= 4
    assert sum(1 for s in statuses if s == 200) == N - 6

    ledger = _poll(lambda: _ledger(gateway.database_url), lambda v: v["requests"] >= n)
    assert ledger["requests"] == n
    after = _poll(scrape, lambda t: total(t, "costgate_requests_total", app=APP) >= n)

    # counters labelled with the app: equal to the ledger's sums for that app
    assert total(after, "costgate_requests_total", app=APP) == n
    failed = sum(total(after, "costgate_requests_total", app=APP, status_class=c) for c in ("5xx",))
    assert failed == ledger["failed"]
    assert total(after, "costgate_requests_total", app=APP, status_class="4xx") == 2
    for kind in ("prompt", "cached_prompt", "completion"):
        assert total(after, "costgate_tokens_total", app=APP, kind=kind) == ledger[kind], kind
    assert ledger["cost"] > 0
    assert _cents_equal(total(after, "costgate_cost_usd_total", app=APP), ledger["cost"])
    assert _cents_equal(total(after, "costgate_list_cost_usd_total", app=APP), ledger["list_cost"])
    assert _cents_equal(
        total(after, "costgate_baseline_cost_usd_total", app=APP), ledger["baseline_cost"]
    )
    net = total(after, "costgate_savings_usd_total", app=APP) - total(
        after, "costgate_negative_savings_usd_total", app=APP
    )
    assert abs(Decimal(repr(net)) - ledger["net_savings"]) < Decimal("1e-9")

    # histograms: this test's requests are their whole increase
    def grew(name: str) -> float:
        return total(after, name) - total(before, name)

    assert grew("costgate_request_duration_seconds_count") == n
    assert grew("costgate_time_to_first_token_seconds_count") == ledger["with_ttft"]
    assert grew("costgate_request_duration_seconds_sum") == pytest.approx(
        float(ledger["latency_ms"]) / 1000, abs=1e-6
    )
    assert grew("costgate_upstream_attempts_total") >= n - 2
    assert grew("costgate_retries_total") >= 1
    assert total(after, "costgate_metrics_reporting_replicas") >= 2
    assert total(after, "costgate_routing_weight", alias="auto", model="deepseek-v3.2") == 60

    # promtool lints the exposition the gateway serves
    lint = subprocess.run(
        ["promtool", "check", "metrics"], input=after, capture_output=True, timeout=30
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr

    # a real Prometheus scraping the gateway gets the same totals through PromQL
    target = gateway.base_url.removeprefix("http://")
    with prometheus_scraping(target, tmp_path) as prom:
        want_cost = total(after, "costgate_cost_usd_total", app=APP)
        got = _poll(
            lambda: prom.scalar(f'sum(costgate_requests_total{{app="{APP}"}})'),
            lambda v: v == n,
            timeout_s=60,
        )
        assert got == n, prom.targets()
        assert prom.targets_up()
        got_cost = prom.scalar(f'sum(costgate_cost_usd_total{{app="{APP}"}})')
        assert got_cost == pytest.approx(want_cost, rel=1e-12)
        assert _cents_equal(got_cost, ledger["cost"])
        tokens = prom.scalar(f'sum(costgate_tokens_total{{app="{APP}",kind="completion"}})')
        assert tokens == ledger["completion"]
        count = prom.scalar("sum(costgate_request_duration_seconds_count)")
        assert count == total(after, "costgate_request_duration_seconds_count")
