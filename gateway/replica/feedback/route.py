"""The feedback route's handler: an app key, a checked body, one transaction.

Not an LLM call: nothing is routed, reserved or recorded. A body that is wrong is a 400
naming its field; a request id the ledger does not know is a 404, another app's request
a 403; a database that cannot answer is a 503, never a 500. The statement runs in a
worker thread on an engine of its own (two connections at most), opened on the first
call, as the usage API's does.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse

from gateway.concurrency.waits import within
from gateway.domain.openai_errors import OpenAIError
from gateway.quality.feedback import FeedbackError, parse_feedback
from gateway.replica.auth import Caller, KeyRing
from gateway.replica.chat_request import parse_json_body
from gateway.replica.request_body import read_body

log = logging.getLogger("costgate.feedback")
MAX_BODY_BYTES = 16 * 1024
STATEMENT_TIMEOUT_S = 10.0


def default_rater(caller: Caller) -> str:
    """Who rates when the body names nobody: the sending key (or the keyless app)."""
    return f"key:{caller.key_id}" if caller.key_id is not None else f"app:{caller.app}"


class FeedbackApi:
    def __init__(self, keys: KeyRing, database_url: str | None) -> None:
        self._keys = keys
        self._url = database_url
        self._engine: Any = None
        self._lock = threading.Lock()

    def _engine_for_writes(self) -> Any:
        with self._lock:  # worker threads: one engine, made once
            if self._engine is None:
                from db.engine import make_engine

                self._engine = make_engine(self._url, pool_size=2, max_overflow=0)
            return self._engine

    async def __call__(self, request: Request) -> JSONResponse:
        caller = await self._keys.identify(request.headers.get("authorization"))
        body = parse_json_body(await read_body(request, MAX_BODY_BYTES), MAX_BODY_BYTES)
        try:
            fb = parse_feedback(body)
        except FeedbackError as err:
            raise OpenAIError(400, err.message, param=err.param, code="invalid_feedback") from None
        if self._url is None:
            raise OpenAIError(503, "No ledger database is configured.", code="ledger_unavailable")
        from db.quality.feedback_store import Stored, store_feedback

        rater = fb.rater or default_rater(caller)

        def write() -> Stored:
            return store_feedback(
                self._engine_for_writes(), request_id=fb.request_id, app=caller.app,
                rater=rater, score=fb.score,
                labels=None if fb.labels is None else list(fb.labels), comment=fb.comment,
            )  # fmt: skip

        try:
            stored = await within(asyncio.to_thread(write), STATEMENT_TIMEOUT_S)
        except Exception as err:  # noqa: BLE001 - the database's state, never the caller's fault
            log.warning("feedback write failed: %s", type(err).__name__)
            raise OpenAIError(
                503, "The ledger cannot take feedback now; try again.", code="ledger_unavailable"
            ) from None
        if stored is Stored.UNKNOWN_REQUEST:
            raise OpenAIError(404, f"No request {fb.request_id} in the ledger (yet).",
                              param="request_id", code="request_not_found")  # fmt: skip
        if stored is Stored.NOT_YOURS:
            raise OpenAIError(403, "This key's app may rate only its own requests.",
                              param="request_id", code="not_your_request")  # fmt: skip
        return JSONResponse({
            "object": "feedback", "request_id": str(fb.request_id), "rater": rater,
            "score": float(fb.score), "replaced": stored is Stored.REPLACED,
        })  # fmt: skip

    def close(self) -> None:
        engine, self._engine = self._engine, None
        if engine is not None:
            engine.dispose()
