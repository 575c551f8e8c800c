"""Riding out upstream faults on a real Serve gateway with the sim: retries, fallbacks,
circuit breakers opening and closing, one usage row per client request."""

from __future__ import annotations

import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from sqlalchemy import text

from db.engine import make_engine
from gateway.control.routing_update import apply_routing_settings
from gateway.domain.routing_settings import RoutingSettings
from tests.fixtures.live_gateway import RoutingGateway

pytestmark = pytest.mark.ray

GEMINI = "gemini-2.5-flash"  # its upstream id is used by no other model of the config


def chat(client: httpx.Client, model: str, i: int) -> httpx.Response:
    return client.post(
        "/v1/chat/completions",
        json={"model": model, "messages": [{"role": "user", "content": f"q {i}"}]},
    )


def set_breaker(gw: RoutingGateway, **knobs: float) -> RoutingSettings:
    def change(current: RoutingSettings, static: object) -> RoutingSettings:
        return current.model_copy(update={"breaker": current.breaker.model_copy(update=knobs)})

    return apply_routing_settings(
        gw.dashboard_url,
        gw.app_name,
        change,
        actor="tests",
        note=f"breaker {knobs}",
        database_url=gw.database_url,
        cfg=gw.cfg,
        gateway_url=gw.base_url,
    ).after


def rows_per_request(database_url: str, ids: list[str], timeout_s: float = 30) -> Counter:
    engine = make_engine(database_url)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            with engine.connect() as conn:
                found = conn.execute(
                    text(
                        "SELECT request_id::text, count(*) FROM usage_records "
                        "WHERE request_id = ANY(CAST(:ids AS uuid[])) GROUP BY request_id"
                    ),
                    {"ids": ids},
                ).all()
            counts = Counter({rid: n for rid, n in found})
            if len(counts) >= len(ids) or time.monotonic() > deadline:
                return counts
            time.sleep(0.5)
    finally:
        engine.dispose()


def test_twenty_percent_faults_on_a_model_are_ridden_out(routing_gateway, sim) -> None:
    gw = routing_gateway
    # Retries ride this out, not the breaker: a CI run saw only 84 faults fired, as if
    # most of the run had gone to the fallback, most likely through the breaker opening
    # on a chance run of faults (5 of the first 10 attempts: 3% at a 20% rate, per
    # replica, with the default 10-attempt minimum). At 100 attempts such a run is
    # negligible; the next test covers the breaker.
    set_breaker(gw, min_requests=100)
    try:
        for kind, options in (
            ("rate_limit", {"retry_after_s": 0.2}),
            ("error_503", {}),
            ("hang", {"hang_s": 5}),
            ("reset", {}),
        ):
            sim.set_fault(GEMINI, kind, 0.05, **options)
        n = 2000
        with (
            httpx.Client(base_url=gw.base_url, timeout=60) as client,
            ThreadPoolExecutor(8) as pool,
        ):
            responses = list(pool.map(lambda i: chat(client, GEMINI, i), range(n)))
    finally:
        set_breaker(gw, min_requests=10)
    statuses = Counter(r.status_code for r in responses)
    ok = statuses[200]
    assert ok / n >= 0.999, statuses
    stats = sim.stats()
    fired, attempts = stats["faults"], stats["requests"].get(GEMINI, 0)
    print(f"\n20% faults on {GEMINI}: {ok}/{n} succeeded; {attempts} attempts, fired {fired}")
    # every request went to the model first, and the faults really happened, every kind
    # of them, many times (about 5% of the attempts each)
    assert attempts >= n, attempts
    kinds = ("rate_limit", "error_503", "hang", "reset")
    assert all(fired.get(f"{GEMINI}:{k}", 0) >= 40 for k in kinds), fired

    ids = [r.headers["x-costgate-request-id"] for r in responses]
    assert len(set(ids)) == n
    counts = rows_per_request(gw.database_url, ids)
    assert len(counts) == n and set(counts.values()) == {1}


def test_a_model_down_opens_its_breaker_and_traffic_returns_when_it_recovers(
    routing_gateway, sim
) -> None:
    gw = routing_gateway
    cooldown = 3.0
    set_breaker(gw, window_s=10, min_requests=5, error_rate=0.5, cooldown_s=cooldown)
    stop = threading.Event()
    answered: list[tuple[float, int, str | None]] = []

    def traffic() -> None:
        with httpx.Client(base_url=gw.base_url, timeout=30) as client:
            for i in range(20_000):
                if stop.is_set():
                    return
                r = chat(client, "fast", i)  # gemini 70 / gpt-4o-mini 30
                answered.append(
                    (time.monotonic(), r.status_code, r.headers.get("x-costgate-model"))
                )

    def gemini_attempts() -> int:
        return sim.stats()["requests"].get(GEMINI, 0)

    clients = [threading.Thread(target=traffic) for _ in range(4)]
    for c in clients:
        c.start()
    try:
        time.sleep(2)
        down_at = time.monotonic()
        sim.set_fault(GEMINI, "error_503", 1.0)
        # open: the sim stops seeing gemini except for the breakers' probes
        opened_at = None
        last, last_t = gemini_attempts(), time.monotonic()
        while time.monotonic() - down_at < 30:
            time.sleep(0.5)
            now_n, now_t = gemini_attempts(), time.monotonic()
            if now_n - last <= 1 and opened_at is None:
                opened_at = last_t
            last, last_t = now_n, now_t
            if opened_at is not None and now_t - opened_at >= 2 * cooldown:
                break
        assert opened_at is not None, "gemini kept getting traffic while down"
        before_probe = gemini_attempts()
        time.sleep(2 * cooldown)
        probes = gemini_attempts() - before_probe
        # two replicas, one probe each per cool-down, the retry of a failed probe aside
        assert probes <= 2 * 2 * 2 + 2, probes

        up_at = time.monotonic()
        sim.clear_faults(GEMINI)
        recovered_at = None
        while time.monotonic() - up_at < 30:
            time.sleep(0.5)
            recent = [m for t, _, m in answered[-100:] if t > time.monotonic() - 1.5]
            if recent and Counter(recent)[GEMINI] / len(recent) > 0.4:
                recovered_at = time.monotonic()
                break
        assert recovered_at is not None, "gemini got no traffic back after it recovered"
    finally:
        stop.set()
        for c in clients:
            c.join(timeout=60)
        sim.clear_faults()
        set_breaker(gw, window_s=30, min_requests=10, error_rate=0.5, cooldown_s=10)

    assert Counter(s for _, s, _ in answered) == {200: len(answered)}
    while_open = [m for t, _, m in answered if opened_at + 0.5 < t < up_at]
    assert while_open and GEMINI not in while_open
    print(
        f"\nbreaker: opened {opened_at - down_at:.1f} s after {GEMINI} went down; "
        f"traffic back {recovered_at - up_at:.1f} s after it recovered (cool-down {cooldown} s); "
        f"{len(answered)} requests, none failed"
    )
