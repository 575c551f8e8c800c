"""Anthropic's Message Batches on the gateway, as the anthropic SDK calls them:

  POST /v1/messages/batches   GET /v1/messages/batches/{id}   GET /v1/messages/batches
  POST /v1/messages/batches/{id}/cancel   GET /v1/messages/batches/{id}/results

Auth by `x-api-key` (or a Bearer key), errors in Anthropic's shape.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from gateway.domain.openai_errors import OpenAIError

from .admission import BatchCaller
from .api import BatchApi
from .lines import parse_anthropic_requests
from .shapes import anthropic_batch

Identify = Callable[[str | None], Awaitable[BatchCaller]]
Handler = Callable[[Request, BatchCaller, BatchApi], Awaitable[Response]]
_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
          404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error"}  # fmt: skip


def _error(err: OpenAIError) -> JSONResponse:
    kind = _TYPES.get(err.status, "api_error")
    return JSONResponse({"type": "error", "error": {"type": kind, "message": err.message}},
                        status_code=err.status, headers=err.headers)  # fmt: skip


def _authorization(request: Request) -> str | None:
    key = request.headers.get("x-api-key")
    return f"Bearer {key}" if key else request.headers.get("authorization")


def anthropic_router(api: BatchApi | None, identify: Identify) -> APIRouter:
    router = APIRouter()

    async def run(request: Request, handler: Handler) -> Response:
        try:
            caller = await identify(_authorization(request))
            if api is None:
                raise OpenAIError(503, "Batches need the ledger's database.")
            return await handler(request, caller, api)
        except OpenAIError as err:
            return _error(err)

    def results_url(request: Request, batch_id: str) -> str:
        return f"{str(request.base_url).rstrip('/')}/v1/messages/batches/{batch_id}/results"

    async def create(request: Request, caller: BatchCaller, a: BatchApi) -> Response:
        try:
            payload: Any = json.loads(await request.body())
        except ValueError:
            raise OpenAIError(400, "The request body is not valid JSON.") from None
        lines = parse_anthropic_requests(payload, a.cfg.batches.max_lines)
        row = await a.create("anthropic", caller, lines, endpoint="/v1/messages")
        return JSONResponse(anthropic_batch(row, results_url(request, row["id"])))

    async def one(request: Request, caller: BatchCaller, a: BatchApi) -> Response:
        batch_id = request.path_params["batch_id"]
        row = await a.find("anthropic", caller.app, batch_id)
        return JSONResponse(anthropic_batch(row, results_url(request, batch_id)))

    async def listing(request: Request, caller: BatchCaller, a: BatchApi) -> Response:
        raw = request.query_params.get("limit", "20")
        if not raw.isdigit() or not 1 <= int(raw) <= 1000:
            raise OpenAIError(400, "limit must be an integer from 1 to 1000")
        limit = int(raw)
        after = request.query_params.get("after_id")
        rows = await a.list("anthropic", caller.app, after, limit + 1)
        data = [anthropic_batch(r, results_url(request, r["id"])) for r in rows[:limit]]
        return JSONResponse({"data": data, "has_more": len(rows) > limit,
                             "first_id": data[0]["id"] if data else None,
                             "last_id": data[-1]["id"] if data else None})  # fmt: skip

    async def cancel(request: Request, caller: BatchCaller, a: BatchApi) -> Response:
        batch_id = request.path_params["batch_id"]
        row = await a.cancel("anthropic", caller.app, batch_id)
        return JSONResponse(anthropic_batch(row, results_url(request, batch_id)))

    async def results(request: Request, caller: BatchCaller, a: BatchApi) -> Response:
        batch_id = request.path_params["batch_id"]
        row = await a.find("anthropic", caller.app, batch_id)
        if row["output_file_id"] is None:
            raise OpenAIError(400, f"Batch {batch_id} has not ended; no results yet.")
        data = await a.files.read(caller.app, row["output_file_id"])
        return Response(data, media_type="application/x-jsonl")

    for path, method, handler in (
        ("/v1/messages/batches", "POST", create),
        ("/v1/messages/batches", "GET", listing),
        ("/v1/messages/batches/{batch_id}", "GET", one),
        ("/v1/messages/batches/{batch_id}/cancel", "POST", cancel),
        ("/v1/messages/batches/{batch_id}/results", "GET", results),
    ):
        router.add_api_route(path, _bound(run, handler), methods=[method])
    return router


def _bound(run: Callable[[Request, Handler], Awaitable[Response]], handler: Handler
           ) -> Callable[[Request], Awaitable[Response]]:  # fmt: skip
    async def endpoint(request: Request) -> Response:
        return await run(request, handler)

    return endpoint
