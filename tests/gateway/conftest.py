"""A gateway without Ray: the same GatewayService and HTTP app, served by uvicorn in a
thread, its records collected in a list. For request-path tests that need no replicas.

Keys are required, as in every shipped config; with no database, its one key is a static
key (`static_key_envs`): `gw.api_key`, sent by `gw.headers`."""

from __future__ import annotations

import asyncio
import secrets
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from gateway.domain.config import load_config
from gateway.domain.usage_record import UsageRecord
from gateway.replica.http_api import serve_app
from gateway.replica.service import GatewayService, RecordSink
from gateway.routing.circuit_breaker import BreakerBoard
from tests.fixtures.gateway import PLAIN_GATEWAY_PORT, PROVIDER_SECRET, gateway_config
from tests.fixtures.ports import PortBlock

PLAIN_KEY_ENV = "COSTGATE_TEST_PLAIN_KEY"


class PlainGateway:
    def __init__(self, service: GatewayService, base_url: str, api_key: str) -> None:
        self.service = service
        self.base_url = base_url
        self.api_key = api_key
        self.headers = {"authorization": f"Bearer {api_key}"}
        self.records: list[UsageRecord] = []

    def wait_records(self, n: int, timeout: float = 10.0) -> list[UsageRecord]:
        deadline = time.monotonic() + timeout
        while len(self.records) < n and time.monotonic() < deadline:
            time.sleep(0.02)
        return list(self.records)


@pytest.fixture(scope="module")
def plain_gateway(
    sim_server: Any, port_block: PortBlock, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PlainGateway]:
    plain_port = port_block.port(PLAIN_GATEWAY_PORT)
    mp = pytest.MonkeyPatch()
    for env in ("OPENAI_API_KEY", "DEEPSEEK_API_KEY", "RELAY_API_KEY"):
        mp.setenv(env, PROVIDER_SECRET)
    api_key = "cg-plain-" + secrets.token_urlsafe(16)
    mp.setenv(PLAIN_KEY_ENV, api_key)
    path = gateway_config(
        Path(sim_server.config_path),
        tmp_path_factory.mktemp("plain") / "costgate.yaml",
        port_block,
        static_key_envs=[PLAIN_KEY_ENV],
        max_body_bytes=64 * 1024,
    )
    cfg = load_config(path)
    holder: dict[str, Any] = {}
    ready = threading.Event()

    def serve() -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        gw: PlainGateway | None = None

        def sink(record: UsageRecord) -> None:
            assert gw is not None
            gw.records.append(record)

        service = GatewayService(cfg, sink=RecordSink(submit=sink))
        gw = PlainGateway(service, f"http://127.0.0.1:{plain_port}", api_key)
        server = uvicorn.Server(
            uvicorn.Config(serve_app(service), host="127.0.0.1", port=plain_port, log_level="error")
        )
        holder.update(gw=gw, server=server)
        ready.set()
        loop.run_until_complete(server.serve())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    ready.wait(10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{plain_port}/healthz").status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.05)
    try:
        yield holder["gw"]
    finally:
        holder["server"].should_exit = True
        thread.join(10)
        mp.undo()


@pytest.fixture
def gw(plain_gateway: PlainGateway, sim: Any) -> Iterator[PlainGateway]:
    """The plain gateway with its records and the sim's faults cleared around a test."""
    service = plain_gateway.service
    service.breakers = BreakerBoard(service.routing.breaker)
    plain_gateway.records.clear()
    yield plain_gateway
    plain_gateway.records.clear()
