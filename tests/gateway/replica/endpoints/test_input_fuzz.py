"""Hostile inputs through the request path (uvicorn, no Ray) to the real sim: every header
the gateway reads, with values a client can send (very long, very long numbers, bytes
outside ASCII, control-looking text, empty), and strings of every length up to the body
limit in every field the gateway reads. Never a 500; every request past auth leaves
exactly one ledger record, and one with a bad key leaves none."""

from __future__ import annotations

import itertools
import json
from typing import Any

import httpx
import pytest
from starlette.requests import Request

from gateway.domain.openai_errors import OpenAIError
from gateway.replica.request_body import read_body

# what the gateway reads: its own switches, the cache's, attribution, Anthropic's, auth
READ_HEADERS = (
    "authorization", "x-api-key", "cache-control", "x-costgate-cache", "x-costgate-model",
    "x-costgate-priority", "x-costgate-no-fallback", "x-costgate-trim", "x-costgate-user",
    "x-costgate-session", "x-costgate-tags", "anthropic-version", "anthropic-beta",
    "x-request-timeout-seconds", "x-request-disconnect-disabled",
)  # fmt: skip
VALUES: tuple[bytes, ...] = (
    b"", b"x\ty", b"on", b"max-age=" + b"9" * 6000, b"9" * 6000, b"max-age=\xb2",
    b"\xff\xfe" * 500, b"x" * 7000, b"=,=;" * 1000, b"Bearer " + b"k" * 7000,
    b"feature=" + b"v" * 5000, b"-1", b"0", b"1e309", b"max-age=99999999999999999",
)  # fmt: skip
CHAT = {"model": "gpt-4o-mini", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
MESSAGES = {"model": "gpt-4o-mini", "max_tokens": 8,
            "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip


def _send(client: httpx.Client, path: str, body: Any, headers: list[tuple[bytes, bytes]]
          ) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return client.post(path, content=content,
                       headers=[(b"content-type", b"application/json"), *headers])


def test_every_header_the_gateway_reads_is_bounded_never_a_500(gw: Any) -> None:
    auth = gw.headers["authorization"].encode()
    sent_with_key = 0
    statuses: dict[int, int] = {}
    with httpx.Client(base_url=gw.base_url, timeout=30) as client:
        for header, value in itertools.product(READ_HEADERS, VALUES):
            name = header.encode()
            for path, body in (("/v1/chat/completions", CHAT), ("/v1/messages", MESSAGES)):
                headers = [(name, value)]
                if header not in ("authorization", "x-api-key"):
                    headers.append((b"authorization", auth))
                if header != "x-costgate-cache":  # the cache's headers count only when on
                    headers.append((b"x-costgate-cache", b"on"))
                r = _send(client, path, body, headers)
                assert r.status_code < 500, (header, value[:40], r.status_code, r.text[:300])
                statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
                if r.status_code != 401:
                    sent_with_key += 1
    records = gw.wait_records(sent_with_key)
    assert len(records) == sent_with_key
    assert len({r.request_id for r in records}) == sent_with_key
    assert statuses.get(200, 0) > 0 and statuses.get(400, 0) > 0  # both kinds were reached
    print("statuses:", statuses)


def _lengths(limit: int) -> list[int]:
    return [0, 1, 63, 64, 65, 255, 256, 257, 512, 513, 4096, limit // 2, limit - 400]


def _placements(text: str) -> list[tuple[str, dict[str, Any]]]:
    """`text` in every field the gateway reads, one at a time."""
    msg = [{"role": "user", "content": "hi"}]
    chat = {"model": "gpt-4o-mini", "max_tokens": 8, "messages": msg}
    return [
        ("/v1/chat/completions", {**chat, "model": text}),
        ("/v1/chat/completions", {**chat, "messages": [{"role": "user", "content": text}]}),
        ("/v1/chat/completions", {**chat, "user": text}),
        ("/v1/chat/completions", {**chat, "safety_identifier": text}),
        ("/v1/chat/completions", {**chat, "metadata": {"k": text}}),
        ("/v1/chat/completions", {**chat, "metadata": {text or "k": "v"}}),
        ("/v1/chat/completions", {**chat, "service_tier": text}),
        ("/v1/chat/completions", {**chat, "messages": [{"role": text, "content": "hi"}]}),
        ("/v1/completions", {"model": "gpt-4o-mini", "max_tokens": 8, "prompt": text}),
        ("/v1/embeddings", {"model": "text-embedding-3-small", "input": text or "x"}),
        ("/v1/responses", {"model": "gpt-4o-mini", "input": text, "instructions": text[:9]}),
        ("/v1/messages", {**chat, "system": text}),
        ("/v1/messages", {**chat, "metadata": {"user_id": text}}),
        ("/v1/messages/count_tokens", {"model": "gpt-4o-mini", "messages": [
            {"role": "user", "content": text or "x"}]}),
    ]


def test_strings_of_every_length_up_to_the_body_limit_never_a_500(gw: Any) -> None:
    limit = gw.service.cfg.gateway.max_body_bytes
    accepted = 0
    with httpx.Client(base_url=gw.base_url, timeout=60, headers=gw.headers) as client:
        for length in _lengths(limit):
            for text in ("a" * length, ("\u00e9\u4e2d " * length)[:length // 3]):
                for path, body in _placements(text):
                    r = _send(client, path, body, [])
                    assert r.status_code < 500, (path, length, r.status_code, r.text[:300])
                    if path.endswith("/count_tokens"):
                        continue  # free, and no upstream call: no ledger row
                    accepted += 1
    records = gw.wait_records(accepted)
    assert len(records) == accepted


@pytest.mark.parametrize("declared", [b"9" * 5000, b"\xb2", b"1\xb2", b"99999999999999999999"])
async def test_a_declared_length_of_any_kind_is_a_413_or_read_never_a_500(declared: bytes
                                                                         ) -> None:
    sent = [{"type": "http.request", "body": b"{}", "more_body": False}]

    async def receive() -> dict[str, Any]:
        return sent.pop() if sent else {"type": "http.disconnect"}

    scope = {"type": "http", "method": "POST", "path": "/", "headers": [
        (b"content-length", declared)]}
    try:
        assert await read_body(Request(scope, receive), 1024) == b"{}"
    except OpenAIError as err:
        assert err.status == 413
