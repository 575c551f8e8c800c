"""An A/B experiment on a real Ray Serve gateway (2 replicas, the sim upstream,
PostgreSQL), started, read and promoted with the CLI: 2,000 requests from 200 end users,
sticky by user, between a dear model the sim's users like and a cheap one they like less.
Each user sees one variant; the results show the cheap variant's lower cost and lower
feedback score, both intervals excluding zero; `promote` sets the alias's live weights on
the same replica processes, audited."""

from __future__ import annotations

import json
import random
import re
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, text

from db.routing_audit import list_routing_changes
from gateway.control.routing_update import read_live_routing
from tests.fixtures.live_gateway import RoutingGateway

pytestmark = pytest.mark.ray

DEAR, CHEAP = "gpt-4.1", "deepseek-v3.2"
USERS, REQUESTS = 200, 2_000


class _Clients:
    """One keep-alive client per sending thread: a new connection per request cost this
    test (4,000 requests) over a minute of a busy machine's CPU."""

    def __init__(self, base_url: str) -> None:
        self._base_url = base_url
        self._local = threading.local()
        self._all: list[httpx.Client] = []
        self._lock = threading.Lock()

    def get(self) -> httpx.Client:
        client = getattr(self._local, "client", None)
        if client is None:
            client = httpx.Client(base_url=self._base_url, timeout=60)
            self._local.client = client
            with self._lock:
                self._all.append(client)
        return client

    def close(self) -> None:
        for client in self._all:
            client.close()


@pytest.fixture
def clients(routing_gateway: RoutingGateway) -> Iterator[_Clients]:
    pool = _Clients(routing_gateway.base_url)
    yield pool
    pool.close()


def _send(clients: _Clients, i: int) -> tuple[str, str, str]:
    body = {"model": "auto", "max_tokens": 8, "user": f"user-{i % USERS}",
            "messages": [{"role": "user", "content": f"question {i}"}]}  # fmt: skip
    r = clients.get().post("/v1/chat/completions", json=body)
    assert r.status_code == 200, r.text
    return r.headers["x-costgate-request-id"], r.headers["x-costgate-model"], f"user-{i % USERS}"


def _wait_rows(gw: RoutingGateway, experiment: str, n: int, timeout: float = 120) -> int:
    engine = create_engine(gw.database_url)
    deadline, count = time.monotonic() + timeout, 0
    query = text("SELECT count(*) FROM usage_records WHERE experiment = :e")
    try:
        while time.monotonic() < deadline:
            with engine.connect() as conn:
                count = conn.execute(query, {"e": experiment}).scalar_one()
            if count >= n:
                break
            time.sleep(0.5)
    finally:
        engine.dispose()
    return int(count)


def _variants_per_user(gw: RoutingGateway, experiment: str) -> dict[str, int]:
    engine = create_engine(gw.database_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(text(
                "SELECT end_user, count(DISTINCT variant) FROM usage_records "
                "WHERE experiment = :e GROUP BY end_user"), {"e": experiment}).all()  # fmt: skip
    finally:
        engine.dispose()
    return {r[0]: int(r[1]) for r in rows}


def _rate(clients: _Clients, answered: list[tuple[str, str, str]], quality: dict[str, float]
          ) -> None:  # fmt: skip
    rng = random.Random(28)
    verdicts = [(rid, "up" if rng.random() < quality[model] else "down")
                for rid, model, _ in answered]  # fmt: skip

    def post(item: tuple[str, str]) -> int:
        r = clients.get().post("/v1/feedback", json={"request_id": item[0], "thumbs": item[1]})
        return r.status_code

    with ThreadPoolExecutor(8) as pool:
        assert set(pool.map(post, verdicts)) == {200}


def test_an_experiment_splits_users_reports_cost_and_quality_and_promotes_live(
    routing_gateway: RoutingGateway, sim: Any, clients: _Clients
) -> None:
    gw = routing_gateway
    upstream = {m: gw.cfg.model(m).upstream_model for m in (DEAR, CHEAP)}  # type: ignore[union-attr]
    sim.set_behaviour(upstream[DEAR], quality=0.9)
    sim.set_behaviour(upstream[CHEAP], quality=0.55)
    in_force = sim.behaviour()["models"]
    quality = {m: in_force[upstream[m]]["quality"] for m in (DEAR, CHEAP)}
    name = f"ab-{uuid.uuid4().hex[:6]}"
    config = ("--config", str(gw.config_path))
    started = gw.cli("experiments", "start", name, "--alias", "auto", "--variant",
                     f"dear={DEAR}", "--variant", f"cheap={CHEAP}", "--split", "50,50",
                     "--stick", "user", *config)  # fmt: skip
    assert started.returncode == 0, started.stderr

    with ThreadPoolExecutor(8) as pool:
        answered = list(pool.map(lambda i: _send(clients, i), range(REQUESTS)))
    assert _wait_rows(gw, name, REQUESTS) == REQUESTS
    per_user = _variants_per_user(gw, name)
    assert len(per_user) == USERS and set(per_user.values()) == {1}
    models_by_user: dict[str, set[str]] = {}
    for _, model, user in answered:
        models_by_user.setdefault(user, set()).add(model)
    assert all(len(m) == 1 for m in models_by_user.values())  # one variant's model each

    _rate(clients, answered, quality)
    shown = gw.cli("experiments", "show", name, "--json", *config)
    assert shown.returncode == 0, shown.stderr
    by = {v["variant"]: v for v in json.loads(shown.stdout)["variants"]}
    assert by["dear"]["requests"] + by["cheap"]["requests"] == REQUESTS
    cost, score = by["cheap"]["measures"]["cost_usd"], by["cheap"]["measures"]["feedback"]
    assert cost["diff"] < 0 and cost["high"] < 0, cost
    assert score["diff"] < 0 and score["high"] < 0, score
    assert by["cheap"]["measures"]["feedback"]["n"] == by["cheap"]["requests"]
    table = gw.cli("experiments", "show", name, *config)
    assert table.returncode == 0 and "feedback score" in table.stdout

    pids = gw.replica_pids()
    promoted = gw.cli("experiments", "promote", name, "cheap", "--actor", "ops:test", *config)
    assert promoted.returncode == 0, promoted.stderr
    assert gw.replica_pids() == pids  # reconfigured in place, not restarted
    live = read_live_routing(gw.dashboard_url, gw.app_name, cfg=gw.cfg).settings
    assert {m: str(w) for m, w in live.aliases["auto"].items()} == {CHEAP: "1"}
    assert live.experiments[name].promoted == "cheap"
    assert live.experiments[name].stopped_at is not None
    (row,) = list_routing_changes(gw.database_url, app_name=gw.app_name, alias="auto", limit=1)
    assert (row.actor, row.status) == ("ops:test", "applied")
    assert row.note == f"experiment promote {name} cheap" and row.after == {CHEAP: "1"}
    elapsed = re.search(r"([0-9.]+) s after it was sent", promoted.stdout)
    print(f"\nexperiment {name}: cost Δ {cost['diff']:.8f} [{cost['low']:.8f}, "
          f"{cost['high']:.8f}] USD/request; feedback Δ {score['diff']:.3f} "
          f"[{score['low']:.3f}, {score['high']:.3f}]; promote live on every replica "
          f"{elapsed.group(1) if elapsed else '?'} s after it was sent")  # fmt: skip
