"""Two Ray nodes on this machine, as `costgate up` and `costgate join` make them.

The head and a worker (its own temp dir, ports and ingress), the gateway scaled live
across both, load through both nodes' ingress, then the worker killed outright (SIGKILL
to every process under its temp dir): clients may fail only for requests in flight at
that moment, and fail fast; every request answered before, during and after has its
ledger row (the dead node's journal is replayed by the head's replicas); `costgate
down` leaves no process of either node. And autoscaling: load takes the replicas from
2 to 4 and back with no failed request, answers and rows reconciled.

One cluster for the module (30-60 s to start on 2 cores); the autoscaling test runs
first, on the head alone, and the node-loss test ends with `costgate down`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from sqlalchemy import create_engine, text

from db.keys import create_key
from gateway.control.cluster import ClusterPaths
from gateway.control.nodes import node_records
from gateway.control.ray_processes import cluster_processes
from gateway.domain.config import GatewayOptions, load_config
from tests.fixtures.database import scratch_database
from tests.fixtures.gateway import PROVIDER_SECRET, gateway_config
from tests.fixtures.ports import claim_block
from tests.runner.temp_dirs import remove_unused

pytestmark = pytest.mark.ray

COSTGATE = [sys.executable, "-m", "gateway.cli"]
MODEL = "gpt-4.1"
MESSAGES = [{"role": "user", "content": "Summarise the quarterly report in three bullets."}]


@dataclasses.dataclass
class Cluster:
    config_path: Path
    state_dir: Path
    env: dict[str, str]
    database_url: str
    api_key: str
    head_url: str
    head_port: int
    head_procs: list[psutil.Process]
    # every worker node's folders in /tmp seen joined: its record goes when it leaves
    node_folders: set[tuple[Path, Path]] = dataclasses.field(default_factory=set)

    def cli(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        out = subprocess.run(
            [*COSTGATE, *args, "--config", str(self.config_path)],
            env=self.env, capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
        self.node_folders.update(
            (Path(r["temp_dir"]), Path(r["haproxy_dir"])) for r in node_records(self.state_dir)
        )
        return out

    def status(self) -> dict[str, Any]:
        out = self.cli("status", "--json", timeout=120)
        assert out.returncode == 0, out.stderr
        status: dict[str, Any] = json.loads(out.stdout)
        return status

    def rows(self, ids: list[str]) -> set[str]:
        engine = create_engine(self.database_url)
        try:
            with engine.connect() as conn:
                found = conn.execute(
                    text("SELECT request_id FROM usage_records "
                         "WHERE request_id = ANY(CAST(:ids AS uuid[]))"),  # fmt: skip
                    {"ids": ids},
                ).scalars().all()
        finally:
            engine.dispose()
        return {str(r) for r in found}

    def wait_rows(self, ids: list[str], timeout: float) -> set[str]:
        deadline = time.monotonic() + timeout
        found: set[str] = set()
        while time.monotonic() < deadline:
            found = self.rows(ids)
            if len(found) == len(set(ids)):
                break
            time.sleep(1.0)
        return found


@pytest.fixture(scope="module")
def cluster(
    sim_server: Any, database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    with scratch_database(database_url, "costgate_nodes") as ledger_url:
        ports = claim_block()
        try:
            yield from _cluster(sim_server, ledger_url, ports, tmp_path_factory)
        finally:
            ports.release()


def _cluster(sim_server: Any, ledger_url: str, ports: Any, tmp: Any) -> Iterator[Cluster]:
    workdir = tmp.mktemp("nodes")
    config_path = gateway_config(
        Path(sim_server.config_path), workdir / "costgate.yaml", ports, num_replicas=2,
        # a shutdown drains idle replicas at once; this bounds a scale-down with streams
        graceful_shutdown_timeout_s=30,
        # Serve's own drain, as a cluster runs it (not the test stacks' shorter one)
        drain_period_s=GatewayOptions().drain_period_s,
        # Serve's Python proxy: one actor per node where HAProxy mode starts two and a
        # binary, which a loaded 2-core machine did not always get ready in time
        ingress="proxy",
    )  # fmt: skip
    cfg = load_config(config_path)
    env = dict(os.environ)
    env.pop("COSTGATE_ADMIN_KEY", None)
    for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        env.pop(name, None)
    state_dir = workdir / "state"
    env.update(
        DATABASE_URL=ledger_url, COSTGATE_STATE_DIR=str(state_dir),
        OPENAI_API_KEY=PROVIDER_SECRET, DEEPSEEK_API_KEY=PROVIDER_SECRET,
        RELAY_API_KEY=PROVIDER_SECRET,
    )  # fmt: skip
    api_key, _ = create_key(ledger_url, "tests", "nodes")
    c = Cluster(
        config_path=config_path, state_dir=state_dir, env=env, database_url=ledger_url,
        api_key=api_key, head_url=f"http://127.0.0.1:{cfg.gateway.port}",
        head_port=cfg.gateway.ray.head_port, head_procs=[],
    )  # fmt: skip
    up = c.cli("up", timeout=400)
    try:
        assert up.returncode == 0, f"{up.stdout}\n{up.stderr}"
        c.head_procs = cluster_processes(ClusterPaths(state_dir).temp_dir)
        yield c
    finally:
        c.cli("down", timeout=400)
        for temp_dir, haproxy_dir in c.node_folders:
            remove_unused(temp_dir, haproxy_dir)


@dataclasses.dataclass
class Outcome:
    target: str
    started: float
    ended: float
    ok: bool
    request_id: str | None
    error: str = ""


class Load:
    """Bounded load: `workers` threads per ingress, each one request at a time."""

    def __init__(self, cluster: Cluster, targets: list[str], *, workers: int, limit: int,
                 duration_s: float) -> None:  # fmt: skip
        self.cluster = cluster
        self.outcomes: list[Outcome] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._closed: set[str] = set()
        self._limit = limit
        self._deadline = time.monotonic() + duration_s
        self._threads = [
            threading.Thread(target=self._run, args=(t, i), daemon=True)
            for t in targets
            for i in range(workers)
        ]

    def start(self) -> Load:
        for t in self._threads:
            t.start()
        return self

    def close_target(self, target: str) -> None:
        """A load balancer's health check took this ingress out: no new requests to it."""
        self._closed.add(target)

    def stop(self) -> list[Outcome]:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in self._threads), "a client hung"
        return self.outcomes

    def _run(self, target: str, index: int) -> None:
        headers = {"authorization": f"Bearer {self.cluster.api_key}"}
        with httpx.Client(base_url=target, headers=headers, timeout=60) as client:
            n = 0
            while not self._stop.is_set() and time.monotonic() < self._deadline:
                with self._lock:
                    if len(self.outcomes) >= self._limit:
                        return
                if target in self._closed:
                    time.sleep(0.1)
                    continue
                self._record(target, self._one(client, stream=(n + index) % 3 == 0))
                n += 1

    def _one(self, client: httpx.Client, *, stream: bool) -> tuple[float, bool, str | None, str]:
        body: dict[str, Any] = {"model": MODEL, "messages": MESSAGES, "max_tokens": 30}
        started = time.monotonic()
        try:
            if stream:
                body["stream"] = True
                with client.stream("POST", "/v1/chat/completions", json=body) as resp:
                    rid = resp.headers.get("x-costgate-request-id")
                    text_ = "".join(resp.iter_text())
                ok = resp.status_code == 200 and "data: [DONE]" in text_ and '"error"' not in text_
                return started, ok, rid, "" if ok else f"{resp.status_code} {text_[-200:]}"
            resp = client.post("/v1/chat/completions", json=body)
            ok = resp.status_code == 200 and bool(resp.json().get("choices"))
            rid = resp.headers.get("x-costgate-request-id")
            return started, ok, rid, "" if ok else f"{resp.status_code} {resp.text[:200]}"
        except (httpx.HTTPError, ValueError) as err:
            return started, False, None, f"{type(err).__name__}: {err}"

    def _record(self, target: str, result: tuple[float, bool, str | None, str]) -> None:
        started, ok, rid, error = result
        with self._lock:
            self.outcomes.append(Outcome(target, started, time.monotonic(), ok, rid, error))


def _replicas_by_node(status: dict[str, Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in status["replicas"]:
        if r["state"] == "RUNNING":
            out[r["node_id"]] = out.get(r["node_id"], 0) + 1
    return out


def _wait_status(cluster: Cluster, ok: Any, timeout: float, what: str) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    status: dict[str, Any] = {}
    while time.monotonic() < deadline:
        status = cluster.status()
        if ok(status):
            return status
        time.sleep(2.0)
    raise AssertionError(f"{what} not seen within {timeout:.0f} s: {json.dumps(status)[:3000]}")


def test_load_scales_the_replicas_from_two_to_four_and_back_with_no_failed_request(
    cluster: Cluster, sim_server: Any
) -> None:
    sim_server.reset()
    # each request holds its replica about 0.4 s: 12 clients keep ~12 in flight, over
    # the 2 replicas' target of 2 each
    sim_server.set_behaviour(MODEL, ttft_ms=100, per_token_ms=10, completion_tokens=[30, 30])
    scaled = cluster.cli(
        "scale", "--min", "2", "--max", "4", "--target-ongoing", "2", "--upscale-delay", "3",
        "--downscale-delay", "10", "--look-back", "3",
    )  # fmt: skip
    assert scaled.returncode == 0, scaled.stderr
    load = Load(cluster, [cluster.head_url], workers=12, limit=3000, duration_s=240).start()
    try:
        _wait_status(cluster, lambda s: len(_replicas_by_node(s)) >= 1
                     and sum(_replicas_by_node(s).values()) == 4, 180, "4 running replicas")
    finally:
        outcomes = load.stop()
    down = _wait_status(cluster, lambda s: sum(_replicas_by_node(s).values()) == 2
                        and len(s["replicas"]) == 2, 180, "back to 2 replicas")  # fmt: skip
    sim_server.clear_behaviour()

    failed = [o for o in outcomes if not o.ok]
    assert outcomes and not failed, f"{len(failed)} of {len(outcomes)} failed: {failed[:3]}"
    ids = [o.request_id for o in outcomes if o.request_id]
    assert len(ids) == len(outcomes)
    found = cluster.wait_rows(ids, timeout=60)
    assert len(found) == len(ids), f"{len(ids) - len(found)} answered requests have no row"
    assert down["routing_version"] is not None
    print(f"autoscaling: {len(outcomes)} requests answered, {len(found)} rows")


def test_a_node_that_leaves_is_drained_first_and_no_request_fails(
    cluster: Cluster, sim_server: Any
) -> None:
    sim_server.reset()
    sim_server.set_behaviour(MODEL, ttft_ms=100, per_token_ms=10, completion_tokens=[20, 20])
    joined = cluster.cli("join", "--address", f"127.0.0.1:{cluster.head_port}",
                         "--num-cpus", "1")  # fmt: skip
    assert joined.returncode == 0, f"{joined.stdout}\n{joined.stderr}"
    (record,) = node_records(cluster.state_dir)
    assert cluster.cli("scale", "3").returncode == 0
    _wait_status(cluster, lambda s: record["node_id"] in _replicas_by_node(s)
                 and sum(_replicas_by_node(s).values()) == 3, 180,
                 "a replica on the new node")  # fmt: skip
    procs = cluster_processes(Path(record["temp_dir"]))
    load = Load(cluster, [cluster.head_url], workers=4, limit=2000, duration_s=240).start()
    try:
        time.sleep(3)
        left = cluster.cli("leave", "--drain-timeout", "120", timeout=300)
    finally:
        outcomes = load.stop()
    assert left.returncode == 0, f"{left.stdout}\n{left.stderr}"
    assert "not drained" not in left.stderr, left.stderr
    failed = [o for o in outcomes if not o.ok]
    assert outcomes and not failed, f"{len(failed)} of {len(outcomes)} failed: {failed[:3]}"
    # drained before it was stopped: no replica of it is left in Serve's view
    status = cluster.status()
    assert not [r for r in status["replicas"] if r["node_id"] == record["node_id"]], status
    assert sum(_replicas_by_node(status).values()) == 3
    assert not cluster_processes(Path(record["temp_dir"]))
    assert not any(_alive(p) for p in procs) and not node_records(cluster.state_dir)
    ids = [o.request_id for o in outcomes if o.request_id]
    assert len(cluster.wait_rows(ids, timeout=60)) == len(ids) == len(outcomes)
    print(f"leave: {len(outcomes)} requests during the drain, none failed, every row there")


def test_a_lost_worker_node_costs_only_its_requests_in_flight_and_no_answered_row(
    cluster: Cluster, sim_server: Any
) -> None:
    sim_server.reset()
    sim_server.set_behaviour(MODEL, ttft_ms=150, per_token_ms=15, completion_tokens=[30, 30])
    joined = cluster.cli("join", "--address", f"127.0.0.1:{cluster.head_port}",
                         "--num-cpus", "1")  # fmt: skip
    assert joined.returncode == 0, f"{joined.stdout}\n{joined.stderr}"
    (record,) = node_records(cluster.state_dir)
    worker_url = f"http://127.0.0.1:{record['http_port']}"
    # at most 2 per node: 4 replicas are spread over both, wherever the earlier ones ran
    scaled = cluster.cli("scale", "4", "--max-per-node", "2", timeout=400)
    assert scaled.returncode == 0, scaled.stderr
    status = _wait_status(cluster, lambda s: len(_replicas_by_node(s)) == 2
                          and sum(_replicas_by_node(s).values()) == 4, 180,
                          "4 replicas over both nodes")  # fmt: skip
    nodes = {n["node_id"]: n for n in status["nodes"] if n["alive"]}
    assert record["node_id"] in nodes and len(nodes) == 2
    assert status["routing_version"] is not None
    # every replica's ledger writer reports, healthy, through the hub
    ledgers = _wait_status(cluster, lambda s: all((r["ledger"] or {}).get("healthy")
                           for r in s["replicas"]), 60, "healthy writers")  # fmt: skip
    assert all(r["ledger"]["spool_depth"] >= 0 for r in ledgers["replicas"])
    # the worker's own ingress answers (Serve's EveryNode proxies)
    wait_ingress(worker_url, 120)

    worker_procs = cluster_processes(Path(record["temp_dir"]))
    assert worker_procs
    assert not {p.pid for p in worker_procs} & {p.pid for p in cluster.head_procs}
    load = Load(cluster, [cluster.head_url, worker_url], workers=3, limit=4000,
                duration_s=240).start()  # fmt: skip
    time.sleep(10)
    killed_at = time.monotonic()
    load.close_target(worker_url)
    for proc in worker_procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.send_signal(signal.SIGKILL)
    # what the dead replicas had answered but not flushed: in their journals only
    journal = cluster.state_dir / "spool" / "journal"
    dead = {str(p.pid) for p in worker_procs}
    orphaned = sum(
        len(f.read_bytes().splitlines())
        for f in journal.glob("usage-spool-*.jsonl")
        if f.name.split("-")[2] in dead
    )
    # the head keeps serving; Serve replaces the lost replicas on the head
    time.sleep(25)
    outcomes = load.stop()

    failed = [o for o in outcomes if not o.ok]
    in_flight = [o for o in failed if o.started <= killed_at <= o.ended]
    late = [o for o in failed if o not in in_flight]
    print(f"node loss: {len(outcomes)} requests, {len(failed)} failed "
          f"({len(in_flight)} in flight at the kill), late: {late[:5]}; errors: "
          f"{[(o.target[-5:], round(o.ended - killed_at, 2), o.error[:80]) for o in failed]}")
    assert not late, f"requests that were not in flight at the kill failed: {late[:5]}"
    # fast: no client waited long for a node that was gone
    assert all(o.ended - killed_at < 20 for o in in_flight), in_flight
    answered = [o for o in outcomes if o.ok]
    assert sum(1 for o in answered if o.target == worker_url) > 0
    assert sum(1 for o in answered if o.started > killed_at) > 0  # served after the loss
    ids = [o.request_id for o in answered]
    assert all(ids)
    # the dead writers' journals are adopted by the head's (at start, or within 30 s)
    found = cluster.wait_rows([i for i in ids if i], timeout=120)
    missing = len(ids) - len(found)
    print(f"node loss: {len(answered)} answered, {len(found)} rows, {missing} missing; "
          f"{orphaned} rows were in the dead replicas' journals at the kill")  # fmt: skip
    assert missing == 0

    down = cluster.cli("down", timeout=400)
    assert down.returncode == 0, down.stderr
    assert not cluster_processes(ClusterPaths(cluster.state_dir).temp_dir)
    assert not cluster_processes(Path(record["temp_dir"]))
    # by process (PID and start time): a PID the system reused is not ours
    alive = [p.pid for p in [*cluster.head_procs, *worker_procs] if _alive(p)]
    assert not alive, alive
    assert not node_records(cluster.state_dir)


def wait_ingress(url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1.0)
    raise AssertionError(f"no ingress answered at {url}")


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
