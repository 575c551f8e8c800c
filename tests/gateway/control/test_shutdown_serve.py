"""`costgate down`'s wait for the replicas (gateway.control.cluster.shutdown_serve), against
a real HTTP server playing the Ray dashboard while Serve shuts down.

Ray's DELETE handler runs `serve.shutdown()` synchronously, so the dashboard stops
answering for up to 30 s, and a controller on its way out may answer 5xx. Neither means
the replicas are gone: `down` stopping the head then kills replicas that still flush
answered requests' rows (seen in CI: 12 answered rows lost). Only an address nobody
listens on any more does.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gateway.control.cluster import shutdown_serve
from gateway.domain.config import load_config
from gateway.domain.environment import EXAMPLE_CONFIG

APPS = {"applications": {"costgate": {"status": "DELETING"}}}


class Dashboard:
    """Answers /api/version, takes the DELETE, then plays `script` on the applications'
    GET (one entry per call, the last repeated): a dict is the JSON answer, an int an
    HTTP status, "hang" a read that outlasts the client's timeout."""

    def __init__(self, script: list[object]) -> None:
        self.script = script
        self.gets = 0
        self.deleted = False
        self.stopped = False
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _send(self, status: int, body: object) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                if self.path.startswith("/api/version"):
                    return self._send(200, {"version": "x"})
                step = owner.script[min(owner.gets, len(owner.script) - 1)]
                owner.gets += 1
                if step == "hang":
                    time.sleep(1.5)
                    return None
                if step == "vanish":  # the head stops: its port closes, nothing answers
                    threading.Thread(target=owner.stop).start()
                    self.close_connection = True
                    return None
                if isinstance(step, int):
                    return self._send(step, {"error": "controller busy"})
                return self._send(200, step)

            def do_DELETE(self) -> None:  # noqa: N802
                owner.deleted = True
                self._send(200, {})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        if not self.stopped:
            self.stopped = True
            self.server.shutdown()
            self.server.server_close()


@pytest.fixture
def dashboard(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[list[object]], Dashboard]]:
    started: list[Dashboard] = []

    def start(script: list[object]) -> Dashboard:
        d = Dashboard(script)
        started.append(d)
        monkeypatch.setenv("COSTGATE_RAY_DASHBOARD_URL", d.url)
        return d

    yield start
    for d in started:
        d.stop()


def test_a_busy_or_failing_dashboard_is_waited_through_until_the_apps_are_gone(
    dashboard, monkeypatch
) -> None:
    # GET_TIMEOUT_S shortened so that a hung read times out within the test
    monkeypatch.setattr("gateway.control.cluster.GET_TIMEOUT_S", 0.5)
    d = dashboard([APPS, 500, 503, "hang", APPS, {"applications": {}}])
    assert shutdown_serve(load_config(EXAMPLE_CONFIG), timeout_s=30) is True
    assert d.deleted
    assert d.gets == 6  # every answer read: none of the failures ended the wait


def test_a_dashboard_that_keeps_failing_runs_the_timeout_out(dashboard) -> None:
    dashboard([APPS, 500])
    began = time.monotonic()
    assert shutdown_serve(load_config(EXAMPLE_CONFIG), timeout_s=2) is False
    assert time.monotonic() - began >= 2


def test_a_head_that_went_away_ends_the_wait_at_once(dashboard) -> None:
    dashboard([APPS, "vanish"])  # the second GET finds nobody listening
    began = time.monotonic()
    assert shutdown_serve(load_config(EXAMPLE_CONFIG), timeout_s=30) is True
    assert time.monotonic() - began < 10
