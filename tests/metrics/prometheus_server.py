"""A real Prometheus server (Debian's /usr/bin/prometheus) for tests, on our port range."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import yaml

PORTS = range(19500, 19550)


def _free_port() -> int:
    for port in PORTS:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {PORTS}")


class PrometheusServer:
    def __init__(self, url: str) -> None:
        self.url = url

    def query(self, promql: str) -> list[dict]:
        resp = httpx.get(f"{self.url}/api/v1/query", params={"query": promql}, timeout=10)
        resp.raise_for_status()
        body = resp.json()
        assert body["status"] == "success", body
        return body["data"]["result"]

    def scalar(self, promql: str) -> float | None:
        """The value of a query that yields one series (a sum), or None before any data."""
        result = self.query(promql)
        return float(result[0]["value"][1]) if result else None

    def targets(self) -> list[dict]:
        """Active targets with their health and last scrape error, as Prometheus sees them."""
        resp = httpx.get(f"{self.url}/api/v1/targets", timeout=10).json()
        return [
            {k: t.get(k) for k in ("scrapeUrl", "health", "lastError")}
            for t in resp["data"]["activeTargets"]
        ]

    def targets_up(self) -> bool:
        active = self.targets()
        return bool(active) and all(t["health"] == "up" for t in active)


@contextlib.contextmanager
def prometheus_scraping(
    target: str, workdir: Path, interval_s: int = 3
) -> Iterator[PrometheusServer]:
    """Start Prometheus scraping `target` (host:port, path /metrics); stop it at exit."""
    config = {
        # a timeout as long as the interval: on 2 busy cores a scrape may take a while
        "global": {
            "scrape_interval": f"{interval_s}s",
            "scrape_timeout": f"{interval_s}s",
            "evaluation_interval": "15s",
        },
        "scrape_configs": [
            {
                "job_name": "costgate",
                "metrics_path": "/metrics",
                "static_configs": [{"targets": [target]}],
            }
        ],
    }
    config_path = workdir / "prometheus.yml"
    config_path.write_text(yaml.safe_dump(config))
    port = _free_port()
    log = (workdir / "prometheus.log").open("wb")
    proc = subprocess.Popen(
        [
            "/usr/bin/prometheus",
            f"--config.file={config_path}",
            f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    server = PrometheusServer(f"http://127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{server.url}/-/ready", timeout=2).status_code == 200:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"Prometheus did not start: {(workdir / 'prometheus.log').read_text()[-2000:]}"
                )
            time.sleep(0.2)
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        log.close()
