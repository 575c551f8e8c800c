"""The usage and costs routes' handler: admin key, parameters, one query, one page.

Not an LLM call: nothing is routed, reserved or recorded, as for `/v1/models`. The
parameters are checked before the database is asked (a bad one is a 400 naming it); a
database that cannot answer is a 503, never a 500. The query runs in a worker thread on
an engine of its own (two connections at most), opened on the first call, so replicas
nobody asks for reports hold no extra connection.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

from fastapi import Request
from fastapi.responses import Response

from db.analytics.usage_queries import fetch_usage
from db.analytics.usage_request import (
    Kind,
    UsageParamError,
    build_page,
    encode_json,
    parse_query,
)
from db.engine import data_lag_s
from gateway.concurrency.waits import within
from gateway.domain.openai_errors import OpenAIError
from gateway.replica.auth import KeyRing

log = logging.getLogger("costgate.usage_api")
QUERY_TIMEOUT_S = 30.0


# on answers read from a replica: how many seconds its data is behind the primary
LAG_HEADER = "x-costgate-data-lag-seconds"


class UsageApi:
    def __init__(
        self, keys: KeyRing, database_url: str | None, read_url: str | None = None
    ) -> None:
        self._keys = keys
        # a streaming replica when DATABASE_READ_URL is set: answers say how far behind
        self._url = read_url or database_url
        self._replica = bool(read_url) and read_url != database_url
        self._engine: Any = None
        self._lock = threading.Lock()

    def _engine_for_queries(self) -> Any:
        with self._lock:  # worker threads: one engine, made once
            if self._engine is None:
                from db.engine import make_engine

                self._engine = make_engine(self._url, pool_size=2, max_overflow=0)
            return self._engine

    async def __call__(self, request: Request, kind: Kind) -> Response:
        await self._keys.identify_admin(request.headers.get("authorization"))
        try:
            query = parse_query(kind, request.query_params.multi_items(), int(time.time()))
        except UsageParamError as err:
            raise OpenAIError(400, err.message, param=err.param, code="invalid_parameter") from None
        if self._url is None:
            raise OpenAIError(503, "No ledger database is configured.", code="ledger_unavailable")
        try:
            rows, lag = await within(
                asyncio.to_thread(lambda: self._fetch(query)), QUERY_TIMEOUT_S
            )
        except Exception as err:  # noqa: BLE001 - the database's state, never the caller's fault
            log.warning("usage query failed: %s", type(err).__name__)
            raise OpenAIError(
                503, "The ledger cannot answer now; try again.", code="ledger_unavailable"
            ) from None
        headers = {LAG_HEADER: f"{lag:.1f}"} if lag is not None else None
        return Response(
            encode_json(build_page(query, rows)), media_type="application/json", headers=headers
        )

    def _fetch(self, query: Any) -> tuple[Any, float | None]:
        engine = self._engine_for_queries()
        rows = fetch_usage(engine, query)
        # after the rows: the data is at least this fresh
        return rows, data_lag_s(engine) if self._replica else None

    def close(self) -> None:
        engine, self._engine = self._engine, None
        if engine is not None:
            engine.dispose()
