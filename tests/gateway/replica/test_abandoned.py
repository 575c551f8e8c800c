"""Requests whose client hangs up mid-flight, through the deployed gateway on Ray Serve:
each leaves exactly one row, marked cancelled, with its prompt counted (the provider
bills the input of a call it started). A client cannot switch Serve's disconnect
handling off with `x-request-disconnect-disabled`."""

from __future__ import annotations

import json
import socket
import time
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from gateway.replica import serve_headers

pytestmark = pytest.mark.ray

MESSAGES = [{"role": "user", "content": "Write a long essay on the history of bookkeeping."}]


def _raw_request(gateway: Any, body: dict[str, Any], extra: dict[str, str] | None = None) -> bytes:
    payload = json.dumps(body).encode()
    headers = {
        "host": "127.0.0.1",
        "authorization": f"Bearer {gateway.api_key}",
        "content-type": "application/json",
        "content-length": str(len(payload)),
        **(extra or {}),
    }
    head = "POST /v1/chat/completions HTTP/1.1\r\n" + "".join(
        f"{k}: {v}\r\n" for k, v in headers.items()
    )
    return head.encode() + b"\r\n" + payload


def _send_and_hang_up(gateway: Any, request: bytes, *, read_first: bool, after_s: float) -> bytes:
    port = int(gateway.base_url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        got = b""
        if read_first:
            while b"data:" not in got:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                got += chunk
        time.sleep(after_s)
    return got  # the socket is closed here, mid-answer


def _cancelled_rows(
    gateway: Any, since: float, n: int, timeout: float = 60
) -> list[dict[str, Any]]:
    engine = create_engine(gateway.database_url)
    deadline = time.monotonic() + timeout
    rows: list[dict[str, Any]] = []
    try:
        while time.monotonic() < deadline:
            with engine.connect() as conn:
                rows = [dict(r) for r in conn.execute(text(
                    "SELECT * FROM usage_records WHERE app = 'tests' AND status = 'cancelled'"
                    " AND started_at >= to_timestamp(:since)"
                ), {"since": since}).mappings()]
            if len(rows) >= n:
                break
            time.sleep(0.5)
    finally:
        engine.dispose()
    return rows


@pytest.fixture
def slow_gpt(gateway: Any, sim: Any) -> str:
    upstream = gateway.cfg.model("gpt-4.1").upstream_model
    sim.set_behaviour(upstream, ttft_ms=4000, per_token_ms=150, completion_tokens=[60, 60])
    return "gpt-4.1"


def test_an_abandoned_plain_request_leaves_one_cancelled_row_with_its_prompt(gateway, slow_gpt):
    since = time.time() - 1
    for extra in (None, {"x-request-disconnect-disabled": "?1"}):
        request = _raw_request(
            gateway, {"model": slow_gpt, "messages": MESSAGES}, extra
        )
        _send_and_hang_up(gateway, request, read_first=False, after_s=0.8)
    rows = _cancelled_rows(gateway, since, 2)
    assert len(rows) == 2  # the header did not keep the second one running unrecorded
    for row in rows:
        assert not row["stream"] and row["error_class"] == "client_disconnected"
        assert row["prompt_tokens"] > 0 and row["usage_source"] == "estimated"
        assert row["attempts"] == 1 and row["list_cost_usd"] is not None
    time.sleep(5)  # the upstream would have answered by now: still one row each
    assert len(_cancelled_rows(gateway, since, 3, timeout=1)) == 2


def test_an_abandoned_stream_leaves_one_cancelled_row_with_what_was_relayed(gateway, sim):
    upstream = gateway.cfg.model("gpt-4.1").upstream_model
    sim.set_behaviour(upstream, ttft_ms=50, per_token_ms=200, completion_tokens=[80, 80])
    since = time.time() - 1
    body = {"model": "gpt-4.1", "messages": MESSAGES, "stream": True}
    got = _send_and_hang_up(gateway, _raw_request(gateway, body), read_first=True, after_s=1.0)
    assert b"200 OK" in got
    [row] = _cancelled_rows(gateway, since, 1)
    assert row["stream"] and row["prompt_tokens"] > 0
    assert row["usage_source"] == "estimated" and row["completion_tokens"] >= 1


def test_the_replicas_ignore_the_clients_serve_switches():
    from ray.serve._private import replica

    assert serve_headers.install()
    headers = {b"x-request-timeout-seconds": b"0", b"x-request-disconnect-disabled": b"?1"}
    assert replica.parse_request_timeout_header(headers, 900.0) == 900.0
    assert replica.parse_disconnect_disabled_header(headers) is False
