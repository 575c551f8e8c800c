"""A Redis of this module's own (never the shared one on 6379: a test stops it) and a
2-replica Ray Serve gateway on the sim whose response cache lives in it."""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.database import scratch_database
from tests.fixtures.gateway import RunningGateway, _gateway
from tests.fixtures.ports import PortBlock, claim_block, port_is_free

REDIS_SERVER = "/usr/bin/redis-server"
REDIS_PORT = 20  # an offset in this module's port block


class RedisProcess:
    def __init__(self, port: int, workdir: Path) -> None:
        self.port = port
        self.url = f"redis://127.0.0.1:{port}/0"
        self._log = open(workdir / "redis.log", "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(workdir)],
            stdout=self._log, stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 10
        while port_is_free(port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start on {port}")
            time.sleep(0.05)

    def command(self, *args: str) -> str:
        done = subprocess.run(
            ["redis-cli", "-p", str(self.port), *args], capture_output=True, text=True, timeout=10
        )
        return done.stdout.strip()

    def cpu_s(self) -> float:
        """The server's CPU seconds so far (user and system)."""
        info = dict(line.split(":", 1) for line in self.command("INFO", "cpu").splitlines()
                    if ":" in line)
        return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])

    def stop(self) -> None:
        """Stop this instance (by its PID), as an outage would."""
        if self.proc.poll() is None:
            self.proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(10)
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()


@pytest.fixture(scope="module")
def cache_ports() -> Iterator[PortBlock]:
    block = claim_block(offsets=(*range(20), 50, REDIS_PORT))
    yield block
    block.release()


@pytest.fixture(scope="module")
def redis_server(
    cache_ports: PortBlock, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RedisProcess]:
    server = RedisProcess(cache_ports.port(REDIS_PORT), tmp_path_factory.mktemp("redis"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def cached_gateway(
    sim_server: Any,
    database_url: str,
    cache_ports: PortBlock,
    redis_server: RedisProcess,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[RunningGateway]:
    # a slow machine: 0.5 s before a lookup gives up on Redis, not the default 50 ms
    cache = {"redis_url": redis_server.url, "redis_timeout_s": 0.5, "ttl_s": 300}
    with scratch_database(database_url, "costgate_cache") as ledger_url:
        yield from _gateway(
            sim_server, ledger_url, cache_ports, tmp_path_factory, extra={"cache": cache}
        )


@pytest.fixture(scope="module")
def shared_gateway(
    sim_server: Any,
    database_url: str,
    cache_ports: PortBlock,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[RunningGateway]:
    """No Redis: the cache is the one every replica shares without it (the ledger's
    database, reached through the fixture's switchable proxy)."""
    # a slow machine: 0.5 s before a lookup gives up on the store, not the default 50 ms
    cache = {"redis_timeout_s": 0.5, "ttl_s": 300}
    with scratch_database(database_url, "costgate_shared_cache") as ledger_url:
        yield from _gateway(
            sim_server, ledger_url, cache_ports, tmp_path_factory, extra={"cache": cache}
        )
