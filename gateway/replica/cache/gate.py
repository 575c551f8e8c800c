"""The response cache on the request path: look up before routing, answer a hit, store
a complete answer. `GatewayService` holds one `ResponseCache` and asks it for a
`CacheTicket` per request.

The lookup runs after the key's scope check and before routing and admission: a hit
sends nothing upstream, so it needs no route (an open breaker does not matter) and
reserves nothing on budgets or rate limits (it costs 0 and is recorded as such).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from fastapi.responses import Response

from gateway.domain import json_codec
from gateway.domain.config import Config
from gateway.domain.pricing import PriceCatalog
from gateway.domain.usage_record import RequestStatus
from gateway.replica.cache.assemble import as_body
from gateway.replica.cache.backends import CacheBackend, MemoryLRU, RedisBackend
from gateway.replica.cache.entry import CacheEntry
from gateway.replica.cache.hit_record import hit_record
from gateway.replica.cache.key import cache_key
from gateway.replica.cache.policy import CACHE_HEADER, OFF, CacheState, Decision, decide
from gateway.replica.cache.replay import as_events
from gateway.replica.endpoints.spec import SPECS
from gateway.replica.exchange import AttemptHooks, Exchange, RecordSink
from gateway.replica.stream_relay import ClientFormat, relay_response
from gateway.replica.usage_accounting import Accounted

log = logging.getLogger("costgate.cache")

MAX_CHUNKS = 10_000  # a longer stream is not stored


class ResponseCache:
    def __init__(
        self,
        cfg: Config,
        catalog: PriceCatalog,
        sink: RecordSink,
        hooks: AttemptHooks,
        headers: Callable[[Exchange], dict[str, str]],
        backend: CacheBackend | None = None,
    ) -> None:
        self.cfg, self.opts, self.catalog = cfg, cfg.cache, catalog
        self.sink, self.hooks, self.headers = sink, hooks, headers
        if backend is None:
            o = self.opts
            backend = (
                RedisBackend(o.redis_url, o.redis_timeout_s) if o.redis_url
                else MemoryLRU(o.max_bytes)
            )
        self.backend = backend
        self.counts: Counter[str] = Counter()

    async def lookup(
        self, ex: Exchange, headers: Mapping[str, str], fmt: ClientFormat | None = None
    ) -> CacheTicket:
        """`fmt`: how a streamed hit is written (default: the API's in SPECS; Anthropic's
        Messages, which is not there, passes its own)."""
        assert ex.request is not None
        decision = decide(headers, self.opts, ex.requested)
        if decision is OFF:
            return CacheTicket(self, ex, decision, None)
        ticket = CacheTicket(self, ex, decision, cache_key(ex.caller.app, ex.endpoint,
                                                           ex.request.body, headers))
        if not decision.lookup:
            self.counts["bypass"] += 1
            return ticket
        raw = await self.backend.get(ticket.key or "")
        entry = self._usable(raw, decision)
        if entry is not None:
            entry = self._as_asked(ex, entry)
        if entry is None:
            self.counts["miss"] += 1
            return ticket
        self.counts["bytes_served"] += len(raw or b"")
        ticket.state = CacheState.HIT
        ex.model = self.cfg.models_by_name[entry.model]
        ticket.response = self._answer(ex, entry, fmt or SPECS[ex.endpoint].stream_format)
        return ticket

    def _as_asked(self, ex: Exchange, entry: CacheEntry) -> CacheEntry | None:
        """The entry as the request wants it: a stored plain answer as a stream's events,
        a stored stream as the plain answer (None: it cannot be, a miss)."""
        try:
            if ex.stream and entry.chunks is None:
                events = as_events(ex.endpoint, json_codec.loads(entry.body or b""))
                return dataclasses.replace(entry, body=None, chunks=tuple(events))
            if not ex.stream and entry.chunks is not None:
                body = as_body(ex.endpoint, entry.chunks, ex.requested)
                return dataclasses.replace(entry, body=json_codec.dumps(body), chunks=None)
        except Exception:  # noqa: BLE001 - an entry this API cannot read: a miss
            self.counts["unreadable"] += 1
            return None
        return entry

    def _usable(self, raw: bytes | None, d: Decision) -> CacheEntry | None:
        if raw is None:
            return None
        try:
            entry = CacheEntry.from_bytes(raw)
        except Exception:  # noqa: BLE001 - a foreign or old value: a miss, overwritten later
            self.counts["unreadable"] += 1
            return None
        if entry.model not in self.cfg.models_by_name:
            return None  # the model left the config: its answer is not served any more
        if d.max_age_s is not None and time.time() - entry.stored_at > d.max_age_s:
            return None
        return entry

    # -- answering a hit ------------------------------------------------------------------

    def _answer(self, ex: Exchange, entry: CacheEntry, fmt: ClientFormat) -> Response:
        if entry.chunks is None:
            ex.ttft_ms = ex.elapsed_ms()
            self._record(ex, entry, RequestStatus.OK, 200, None)  # before its cost headers
            headers = self.headers(ex) | {CACHE_HEADER: CacheState.HIT.value}
            return Response(entry.body, headers=headers, media_type="application/json")
        headers = self.headers(ex) | {CACHE_HEADER: CacheState.HIT.value}

        def abandoned() -> None:
            self.hooks.inflight(-1)
            self._record(ex, entry, RequestStatus.CANCELLED, 200, "client_disconnected")

        stream = self._replay(ex, entry, fmt)
        return relay_response(stream, ex, on_abandon=abandoned, headers=headers)

    async def _replay(
        self, ex: Exchange, entry: CacheEntry, fmt: ClientFormat
    ) -> AsyncIterator[bytes]:
        """The stored events, one chunk each, as the original stream sent them."""
        assert ex.request is not None and entry.chunks is not None
        ex.relay_started = True
        include_usage = ex.request.include_usage
        done = False
        try:
            for event in entry.chunks:
                out = fmt.encode(dict(event), ex.requested, include_usage)
                if out is not None:
                    if ex.ttft_ms is None:
                        ex.ttft_ms = ex.elapsed_ms()
                    yield out
            done = True  # settled before the last event: a hang-up after it cancels nothing
            if fmt.done is not None:
                yield fmt.done
        finally:
            self.hooks.inflight(-1)
            if done:
                self._record(ex, entry, RequestStatus.OK, 200, None)
            else:
                self._record(ex, entry, RequestStatus.CANCELLED, 200, "client_disconnected")

    def _record(
        self, ex: Exchange, entry: CacheEntry, status: RequestStatus, http: int, err: str | None
    ) -> None:
        if ex.recorded:
            return
        ex.recorded = True
        try:
            record = hit_record(ex, self.cfg, self.catalog, entry, status, http, err)
        except Exception:  # noqa: BLE001 - a ledger bug must not fail the client's request
            log.exception("could not build the usage record of cache hit %s", ex.request_id)
            return
        ex.costs = (record.actual_cost_usd, record.list_cost_usd)
        # counted with its ledger row: /metrics' hits are the dashboard's cache_hit rows
        self.counts["hit"] += 1
        self.sink(record)

    # -- storing --------------------------------------------------------------------------

    def store(self, ticket: CacheTicket, entry: CacheEntry) -> None:
        """Hand the entry to the backend without awaiting it: the answer is already out."""
        data = entry.to_bytes()
        if len(data) > self.opts.max_entry_bytes:
            self.counts["too_large"] += 1
            return
        self.backend.put(ticket.key or "", data, ticket.decision.ttl_s)

    async def flush(self) -> None:
        """Wait for the stores handed over (tests, and a replica's shutdown)."""
        await self.backend.flush()

    def stats(self) -> dict[str, int]:
        return dict(self.counts) | self.backend.stats()

    async def aclose(self) -> None:
        await self.flush()
        await self.backend.aclose()


@dataclasses.dataclass(slots=True)
class CacheTicket:
    """One request's use of the cache: what it decided, and a hit's response."""

    cache: ResponseCache
    ex: Exchange
    decision: Decision
    key: str | None
    state: CacheState = dataclasses.field(init=False)
    response: Response | None = None
    chunks: list[dict[str, Any]] | None = None

    def __post_init__(self) -> None:
        self.state = self.decision.state

    def tag(self, response: Response) -> Response:
        response.headers[CACHE_HEADER] = self.state.value
        return response

    def store_body(
        self, body: dict[str, Any], sent: bytes | memoryview, accounted: Accounted
    ) -> None:
        """A plain answer (`sent`: its JSON as the response rendered it, stored as it is);
        a Responses answer its upstream marked failed is not one. Stored on the event
        loop's next turn, after the response is written: the entry's bytes and the hand-over
        (about 50 µs in a replica at concurrency 1) are not on the answer's path."""
        ex = self.ex
        if not self.decision.store or ex.model is None or body.get("status") == "failed":
            return
        data = bytes(sent)  # no copy of bytes; a memoryview's buffer may not outlive this

        def store() -> None:
            self.cache.store(self, self._entry(accounted, body=data))

        asyncio.get_running_loop().call_soon(store)

    def tee(self, fmt: ClientFormat) -> ClientFormat:
        """The API's client format, noting each event on its way to the client."""
        if not self.decision.store:
            return fmt
        chunks = self.chunks = []

        def encode(event: dict[str, Any], model: str, usage: bool) -> bytes | None:
            if len(chunks) <= MAX_CHUNKS:
                chunks.append(dict(event))  # before encode drops the usage or renames
            return fmt.encode(event, model, usage)

        return dataclasses.replace(fmt, encode=encode)

    def store_stream(self, status: RequestStatus, accounted: Accounted) -> None:
        """A stream that ended complete (its [DONE] or last event arrived)."""
        chunks, ex = self.chunks, self.ex
        if chunks is None or status is not RequestStatus.OK or ex.model is None:
            return
        if len(chunks) > MAX_CHUNKS:
            self.cache.counts["too_large"] += 1
            return
        self.cache.store(self, self._entry(accounted, chunks=tuple(chunks)))

    def _entry(self, accounted: Accounted, **answer: Any) -> CacheEntry:
        assert self.ex.model is not None
        return CacheEntry(
            self.ex.model.name, time.time(), accounted.usage, accounted.source, **answer
        )
