"""Scenario 2: hostile bodies. Each must be refused with a 4xx, never a 5xx, and leave at
most one ledger row.

The bytes go out over a raw socket, not an HTTP client: clients refuse to send most of
these (invalid UTF-8, lone surrogates, a body that never ends), which is the point.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

from gateway.concurrency.waits import within
from gateway.devtools.chaos.bookkeeping import Context, expect, finish, utcnow
from gateway.devtools.chaos.load import CLIENT_ID_HEADER, REQUEST_ID_HEADER, Outcome
from gateway.devtools.chaos.report import ScenarioResult
from gateway.devtools.chaos.rss_watch import MIB, proxy_pids, watch_rss

PATH = "/v1/chat/completions"
MODEL = "gpt-4o-mini"
MESSAGES = '[{"role":"user","content":"hi"}]'
# what a replica's RSS may grow past the body limit while it refuses a giant body
RSS_MARGIN_MIB = 8


def _body(**fields: object) -> bytes:
    return json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "hi"}],
                       **fields}).encode()  # fmt: skip


def hostile_bodies() -> dict[str, bytes]:
    """Name -> the exact bytes sent (the chunked giant is made apart, as it streams)."""
    depth = 100_000
    return {
        "nested-json-bomb": (f'{{"model":"{MODEL}","messages":' + "[" * depth + "]" * depth
                             + "}").encode(),  # fmt: skip
        "nested-object-bomb": ('{"a":' * depth + "1" + "}" * depth).encode(),
        "control-chars-in-model": _body(model="gpt-4o-mini\u0000\u0007\u001b[2J\r\n"),
        "lone-surrogate-content": (f'{{"model":"{MODEL}","messages":'
                                   '[{"role":"user","content":"a\\ud800b"}]}').encode(),
        "lone-surrogate-model": f'{{"model":"gpt\\udfff","messages":{MESSAGES}}}'.encode(),
        "huge-n": _body(n=10**9),
        "n-5000-digits": f'{{"model":"{MODEL}","messages":{MESSAGES},"n":{"9" * 5000}}}'.encode(),
        "negative-max-tokens": _body(max_tokens=-1),
        "model-not-a-string": _body(model=123),
        "messages-not-a-list": _body(messages="hi"),
        "message-not-an-object": _body(messages=[42]),
        "stream-not-a-bool": _body(stream="yes"),
        "temperature-an-object": _body(temperature={"a": 1}),
        "max-tokens-a-string": _body(max_tokens="10"),
        "temperature-nan": f'{{"model":"{MODEL}","messages":{MESSAGES},'
                           '"temperature":NaN}'.encode(),
        "invalid-utf8": (f'{{"model":"{MODEL}","messages":[{{"role":"user","content":"'
                         .encode() + b"\xff\xfe\xc3(" + b'"}]}'),  # fmt: skip
        "empty-body": b"",
        "not-json": b"hello",
        "json-null": b"null",
        "json-number": b"1",
        "json-true": b"true",
        "json-array": b"[]",
        "model-3mib": _body(model="m" * (3 * 2**20)),
    }


def _giant_chunks(mib: int) -> Iterator[bytes]:
    """A chat body of `mib` MiB, sent chunked: no Content-Length warns the server."""
    yield f'{{"model":"{MODEL}","messages":[{{"role":"user","content":"'.encode()
    block = b"a" * 2**20
    for _ in range(mib):
        yield block
    yield b'"}]}'


async def send_raw(url: str, headers: dict[str, str], body: bytes | None = None,
                   chunks: Iterator[bytes] | None = None,
                   timeout_s: float = 60) -> tuple[int | None, dict[str, str], str | None]:
    """One HTTP/1.1 POST from raw bytes: (status or None, headers, error)."""
    parts = urlsplit(url)
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    head = [f"POST {parts.path or PATH} HTTP/1.1", f"Host: {parts.netloc}",
            "Content-Type: application/json", "Connection: close",
            *(f"{k}: {v}" for k, v in headers.items())]  # fmt: skip
    head.append("Transfer-Encoding: chunked" if chunks is not None
                else f"Content-Length: {len(body or b'')}")  # fmt: skip
    response = asyncio.create_task(_read_head(reader))
    error: str | None = None
    try:
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
        if chunks is None:
            writer.write(body or b"")
            await writer.drain()
        else:
            for chunk in chunks:
                if response.done():
                    break  # refused before the end: stop sending, as a client would
                writer.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                await writer.drain()
            else:
                writer.write(b"0\r\n\r\n")
                await writer.drain()
    except (ConnectionError, OSError) as err:
        error = type(err).__name__  # the server hung up mid-upload: its answer may be in
    try:
        status, got = await within(response, timeout_s)
    except (TimeoutError, ConnectionError, OSError, ValueError) as err:
        status, got, error = None, {}, error or type(err).__name__
    finally:
        response.cancel()
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()
    return status, got, error


async def _read_head(reader: asyncio.StreamReader) -> tuple[int | None, dict[str, str]]:
    line = await reader.readline()
    if not line:
        return None, {}
    status = int(line.split()[1])
    headers: dict[str, str] = {}
    while (raw := await reader.readline()) not in (b"\r\n", b"\n", b""):
        name, _, value = raw.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers


def run(ctx: Context) -> ScenarioResult:
    name = "hostile"
    started, since = time.monotonic(), utcnow()
    auth = {"Authorization": f"Bearer {ctx.key(name)}"}
    url = ctx.stack.gateway_url + PATH
    outcomes: list[Outcome] = []
    seen: list[str] = []
    statuses: dict[str, object] = {}

    async def one(case: str, body: bytes | None, chunks: Iterator[bytes] | None) -> None:
        t0 = time.time()
        status, headers, error = await send_raw(
            url, {**auth, CLIENT_ID_HEADER: f"{name}-{case}"}, body, chunks)
        outcomes.append(Outcome(f"{name}-{case}", t0, time.time(), status,
                                headers.get(REQUEST_ID_HEADER), error=error))
        statuses[case] = status
        seen.append(f"{case} {status if status is not None else 'no answer'}"
                    + (f" ({error})" if error else ""))

    async def all_cases() -> None:
        for case, body in hostile_bodies().items():
            await one(case, body, None)

    async def giant() -> None:
        await one(f"chunked-{ctx.sizes.big_body_mib}mib", None,
                  _giant_chunks(ctx.sizes.big_body_mib))

    asyncio.run(all_cases())
    targets = {pid: "replica" for pid in ctx.stack.replica_pids()}
    targets.update({pid: "proxy" for pid in proxy_pids(ctx.stack.state_dir)})
    with watch_rss(targets) as growth:
        asyncio.run(giant())
    result, acc = finish(ctx, name, outcomes, since, started, settle_s=15)
    result.notes.insert(0, "; ".join(seen))
    result.notes.insert(1, f"while the chunked {ctx.sizes.big_body_mib} MiB body was sent: "
                        + ", ".join(g.render() for g in growth))  # fmt: skip
    # the replica reads up to max_body_bytes before it refuses: that much, and a margin
    allowed = ctx.stack.config["gateway"].get("max_body_bytes", 4 * MIB) / MIB + RSS_MARGIN_MIB
    fat = [g for g in growth if g.label == "replica" and g.grew_mib > allowed]
    expect(result, bool(growth) and not fat,
           f"replica RSS grew more than {allowed:.0f} MiB: "
           + ", ".join(g.render() for g in fat or growth))  # fmt: skip
    result.details = statuses
    bad = [o.client_id for o in outcomes if o.status is None or not 400 <= o.status < 500]
    expect(result, not bad, f"not a 4xx: {', '.join(bad)}")
    expect(result, acc.duplicated == 0 and acc.rows <= len(outcomes),
           f"more than one row per request ({acc.rows} rows for {len(outcomes)} requests)")
    return result
