"""The simulator as a child process, and a small client for its control API.

Used by the test fixture and by anything else that needs a sim next to it (the demo):
start on a port, wait until it answers, switch faults on and off, read its counters,
stop it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, cast

import httpx


class SimStartError(RuntimeError):
    pass


class SimControl:
    """The control API of a running simulator at `base_url` (http://host:port)."""

    def __init__(self, base_url: str):
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(base_url=self.base_url, timeout=10)

    def provider_url(self, provider: str) -> str:
        """The OpenAI base URL under which the sim plays `provider` (…/openai/v1)."""
        return f"{self.base_url}/{provider}/v1"

    def set_fault(self, model: str, kind: str, probability: float = 1.0,
                  **options: Any) -> dict[str, Any]:
        """Make `model` (an upstream id, or "*") fail with `kind`.

        options: count (fire at most N times), retry_after_s (rate_limit), hang_s (hang).
        """
        body = {"model": model, "kind": kind, "probability": probability, **options}
        return self._ok(self._http.put("/_sim/faults", json=body))

    def clear_faults(self, model: str | None = None) -> None:
        params = {"model": model} if model else None
        self._ok(self._http.delete("/_sim/faults", params=params))

    def set_behaviour(self, model: str, **figures: Any) -> dict[str, Any]:
        """Override ttft_ms, per_token_ms, jitter, completion_tokens=(lo, hi) for a model."""
        return self._ok(self._http.put("/_sim/behaviour", json={"model": model, **figures}))

    def behaviour(self) -> dict[str, Any]:
        """The figures in force: {"default": {...}, "models": {upstream id: {...}}}."""
        return self._ok(self._http.get("/_sim/behaviour"))

    def clear_behaviour(self) -> None:
        self._ok(self._http.delete("/_sim/behaviour"))

    def stats(self) -> dict[str, Any]:
        """Counters: requests/streams/with_bearer per model, statuses, faults fired, and
        the gauges in_flight, streams_open and connections_open."""
        return self._ok(self._http.get("/_sim/stats"))

    def recent_requests(self) -> list[dict[str, Any]]:
        """The last requests' model, parameters (scalars only), header names, bearer hash."""
        requests = self._ok(self._http.get("/_sim/requests"))["requests"]
        return cast(list[dict[str, Any]], requests)  # control.recent_requests: a list of objects

    def reset(self) -> None:
        """Counters to zero; faults and behaviour back to the configuration file's."""
        self._ok(self._http.post("/_sim/reset"))

    def ready(self) -> bool:
        return self._health_pid() is not None

    def _health_pid(self) -> int | None:
        try:
            response = self._http.get("/healthz", timeout=1)
        except httpx.TransportError:
            return None
        return response.json().get("pid") if response.status_code == 200 else None

    def close(self) -> None:
        self._http.close()

    @staticmethod
    def _ok(response: httpx.Response) -> dict[str, Any]:
        if response.status_code >= 400:
            raise ValueError(f"sim control {response.request.url.path}: {response.text}")
        # httpx parses to Any; every /_sim route (sim/control.py) answers with a JSON object
        return cast(dict[str, Any], response.json())


def port_is_free(host: str, port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


class SimProcess(SimControl):
    """`python -m gateway.devtools.sim` on the first free port of a range."""

    def __init__(self, process: subprocess.Popen[bytes], host: str, port: int,
                 config_path: Path):
        super().__init__(f"http://{host}:{port}")
        self.process = process
        self.host, self.port, self.config_path = host, port, config_path

    @classmethod
    def start(cls, config_path: str | Path, ports: range, host: str = "127.0.0.1",
              timeout_s: float = 20.0, log_path: Path | None = None) -> SimProcess:
        """Start on the first port of `ports` that is free and stays ours until ready."""
        last_error = "no free port"
        for port in ports:
            if not port_is_free(host, port):
                continue
            sim = cls._spawn(Path(config_path), host, port, log_path)
            if sim._wait_ready(timeout_s):
                return sim
            last_error = f"port {port}: exited with {sim.process.returncode}"
            sim.stop()
        raise SimStartError(f"could not start the sim in {ports}: {last_error}")

    @classmethod
    def _spawn(cls, config_path: Path, host: str, port: int,
               log_path: Path | None) -> SimProcess:
        cmd = [sys.executable, "-m", "gateway.devtools.sim", "--config", str(config_path),
               "--host", host, "--port", str(port)]
        out = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115
        process = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                   env={**os.environ, "PYTHONUNBUFFERED": "1"})
        return cls(process, host, port, config_path)

    def _wait_ready(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False  # lost the port to someone else, or a bad config
            pid = self._health_pid()
            if pid is not None:
                return pid == self.process.pid
            time.sleep(0.05)
        return False

    def stop(self) -> None:
        self.close()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
