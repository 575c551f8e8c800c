"""OpenAI's Files and Batch APIs on the gateway, as the openai SDK calls them:

  POST /v1/files (multipart: purpose=batch, file)   GET /v1/files/{id}
  GET /v1/files/{id}/content                        DELETE /v1/files/{id}
  POST /v1/batches   GET /v1/batches/{id}   GET /v1/batches   POST /v1/batches/{id}/cancel

The same gateway keys as chat completions; a file or batch of another app is a 404.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from starlette.datastructures import UploadFile

from gateway.domain.openai_errors import OpenAIError

from .admission import BatchCaller
from .api import BatchApi
from .files import file_object
from .lines import parse_openai_lines
from .shapes import openai_batch

Identify = Callable[[str | None], Awaitable[BatchCaller]]
MULTIPART_SLACK = 64 * 1024  # the form's own bytes around the file
WINDOWS = ("24h",)


def _limit(request: Request, default: int = 20) -> int:
    raw = request.query_params.get("limit", str(default))
    if not raw.isdigit() or not 1 <= int(raw) <= 100:
        raise OpenAIError(400, "limit must be an integer from 1 to 100", param="limit")
    return int(raw)


def _body(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw)
    except ValueError:
        raise OpenAIError(400, "We could not parse the JSON body of your request.") from None
    if not isinstance(body, dict):
        raise OpenAIError(400, "The request body must be a JSON object.")
    return body


def openai_router(api: BatchApi | None, identify: Identify) -> APIRouter:
    router = APIRouter()

    async def caller_and_api(request: Request) -> tuple[BatchCaller, BatchApi]:
        caller = await identify(request.headers.get("authorization"))
        if api is None:
            raise OpenAIError(503, "Batches need the ledger's database.", code="no_ledger")
        return caller, api

    @router.post("/v1/files")
    async def create_file(request: Request) -> JSONResponse:
        caller, a = await caller_and_api(request)
        limit = a.cfg.batches.max_file_bytes
        length = request.headers.get("content-length", "")
        if length.isdigit() and int(length) > limit + MULTIPART_SLACK:
            raise OpenAIError(413, f"Files are limited to {limit} bytes.", param="file")
        try:
            form = await request.form(max_files=1, max_fields=4)
        except Exception:  # noqa: BLE001 - any malformed form is the client's error
            raise OpenAIError(400, "Send multipart/form-data with `purpose` and `file`.") from None
        try:  # the form's parts are spooled to temporary files: closed whatever happens
            purpose, upload = form.get("purpose"), form.get("file")
            if purpose != "batch":
                raise OpenAIError(400, "purpose: only 'batch' is served here", param="purpose")
            if not isinstance(upload, UploadFile):
                raise OpenAIError(400, "file: a file part is required", param="file")
            data = await upload.read(limit + 1)
            filename = upload.filename or "upload.jsonl"
        finally:
            await form.close()
        if len(data) > limit:
            raise OpenAIError(413, f"Files are limited to {limit} bytes.", param="file")
        row = await a.files.save(caller.app, "batch", filename, data)
        return JSONResponse(file_object(row))

    @router.get("/v1/files/{file_id}")
    async def get_file(file_id: str, request: Request) -> JSONResponse:
        caller, a = await caller_and_api(request)
        return JSONResponse(file_object(await a.files.find(caller.app, file_id)))

    @router.get("/v1/files/{file_id}/content")
    async def file_content(file_id: str, request: Request) -> Response:
        caller, a = await caller_and_api(request)
        data = await a.files.read(caller.app, file_id)
        return Response(data, media_type="application/jsonl")

    @router.delete("/v1/files/{file_id}")
    async def delete_file(file_id: str, request: Request) -> JSONResponse:
        caller, a = await caller_and_api(request)
        await a.files.delete(caller.app, file_id)
        return JSONResponse({"id": file_id, "object": "file", "deleted": True})

    @router.post("/v1/batches")
    async def create_batch(request: Request) -> JSONResponse:
        caller, a = await caller_and_api(request)
        body = _body(await request.body())
        file_id, endpoint = body.get("input_file_id"), body.get("endpoint")
        window = body.get("completion_window", "24h")
        if not isinstance(file_id, str) or not file_id:
            raise OpenAIError(400, "input_file_id is required", param="input_file_id")
        if not isinstance(endpoint, str):
            raise OpenAIError(400, "endpoint is required", param="endpoint")
        if window not in WINDOWS:
            raise OpenAIError(400, "completion_window must be '24h'", param="completion_window")
        metadata = body.get("metadata")
        if metadata is not None and not isinstance(metadata, dict):
            raise OpenAIError(400, "metadata must be an object", param="metadata")
        data = await a.files.read(caller.app, file_id)  # another app's file: a 404
        lines = parse_openai_lines(data, endpoint, a.cfg.batches.max_lines)
        row = await a.create("openai", caller, lines, endpoint=endpoint, window=window,
                             input_file_id=file_id, metadata=metadata)  # fmt: skip
        return JSONResponse(openai_batch(row))

    @router.get("/v1/batches/{batch_id}")
    async def get_batch(batch_id: str, request: Request) -> JSONResponse:
        caller, a = await caller_and_api(request)
        return JSONResponse(openai_batch(await a.find("openai", caller.app, batch_id)))

    @router.get("/v1/batches")
    async def list_batches(request: Request) -> JSONResponse:
        caller, a = await caller_and_api(request)
        limit = _limit(request)
        rows = await a.list("openai", caller.app, request.query_params.get("after"), limit + 1)
        data = [openai_batch(r) for r in rows[:limit]]
        return JSONResponse({
            "object": "list", "data": data, "has_more": len(rows) > limit,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
        })

    @router.post("/v1/batches/{batch_id}/cancel")
    async def cancel_batch(batch_id: str, request: Request) -> JSONResponse:
        caller, a = await caller_and_api(request)
        return JSONResponse(openai_batch(await a.cancel("openai", caller.app, batch_id)))

    return router
