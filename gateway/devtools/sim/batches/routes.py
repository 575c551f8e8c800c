"""The simulator's batch routes, under every provider prefix as the other APIs are:

  POST [/{provider}]/v1/files   GET [/{provider}]/v1/files/{id}/content
  POST [/{provider}]/v1/batches   GET .../v1/batches/{id}   POST .../v1/batches/{id}/cancel
  POST [/{provider}]/v1/messages/batches   GET .../{id}   GET .../{id}/results
  POST .../v1/messages/batches/{id}/cancel
  GET|PUT /_sim/batches   the delay, the custom ids that fail, and what was received
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any, cast

from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.devtools.sim.batches.store import SimBatch, SimBatches
from gateway.devtools.sim.state import sim_state


def sim_batches(request: Request) -> SimBatches:
    # build_app puts it beside the SimState
    return cast(SimBatches, request.app.state.sim_batches)


def _missing(what: str) -> JSONResponse:
    return JSONResponse({"error": {"message": f"No such {what}.", "type": "invalid_request_error"}},
                        status_code=404)


def _iso(at: float | None) -> str | None:
    if at is None:
        return None
    return dt.datetime.fromtimestamp(at, dt.UTC).isoformat().replace("+00:00", "Z")


def _openai(batch: SimBatch) -> dict[str, Any]:
    return {"id": batch.id, "object": "batch", "endpoint": batch.endpoint,
            "status": batch.status, "created_at": int(batch.created),
            "output_file_id": batch.output_file_id, "error_file_id": batch.error_file_id,
            "completion_window": "24h",
            "request_counts": batch.counts or {"total": len(batch.lines), "completed": 0,
                                               "failed": 0}}


def _anthropic(batch: SimBatch, request: Request) -> dict[str, Any]:
    ended = batch.status == "ended"
    base = str(request.url).split("/v1/messages/batches")[0]
    return {"id": batch.id, "type": "message_batch",
            "processing_status": "ended" if ended else
            "canceling" if batch.cancelled else "in_progress",
            "created_at": _iso(batch.created), "ended_at": None,
            "results_url": f"{base}/v1/messages/batches/{batch.id}/results" if ended else None}


async def upload(request: Request) -> Response:
    form = await request.form(max_files=1, max_part_size=1024 * 1024)
    part = form.get("file")
    if not isinstance(part, UploadFile) or form.get("purpose") != "batch":
        return JSONResponse({"error": {"message": "purpose=batch and a file are required"}},
                            status_code=400)
    data = await part.read()
    file_id = sim_batches(request).add_file(data)
    return JSONResponse({"id": file_id, "object": "file", "bytes": len(data),
                         "purpose": "batch", "filename": part.filename})


async def content(request: Request) -> Response:
    data = sim_batches(request).files.get(request.path_params["file_id"])
    return _missing("file") if data is None else Response(data, media_type="application/jsonl")


async def create(request: Request) -> Response:
    store, body = sim_batches(request), json.loads(await request.body())
    data = store.files.get(body.get("input_file_id", ""))
    if data is None:
        return _missing("file")
    lines = [json.loads(raw) for raw in data.decode().splitlines() if raw.strip()]
    return JSONResponse(_openai(store.add("openai", lines, body.get("endpoint", ""))))


def _found(request: Request, api: str) -> SimBatch | None:
    store = sim_batches(request)
    batch = store.batches.get(request.path_params["batch_id"])
    if batch is None or batch.api != api:
        return None
    return store.advance(batch, sim_state(request))


async def one(request: Request) -> Response:
    batch = _found(request, "openai")
    return _missing("batch") if batch is None else JSONResponse(_openai(batch))


async def cancel(request: Request) -> Response:
    api = "anthropic" if "/messages/" in request.url.path else "openai"
    store = sim_batches(request)
    batch = store.batches.get(request.path_params["batch_id"])
    if batch is None or batch.api != api:
        return _missing("batch")
    batch.cancelled = batch.status in ("in_progress",)
    store.advance(batch, sim_state(request))
    return JSONResponse(_openai(batch) if api == "openai" else _anthropic(batch, request))


async def create_messages(request: Request) -> Response:
    body = json.loads(await request.body())
    batch = sim_batches(request).add("anthropic", list(body.get("requests") or []),
                                     "/v1/messages")
    return JSONResponse(_anthropic(batch, request))


async def one_messages(request: Request) -> Response:
    batch = _found(request, "anthropic")
    return _missing("batch") if batch is None else JSONResponse(_anthropic(batch, request))


async def results(request: Request) -> Response:
    batch = _found(request, "anthropic")
    if batch is None or batch.status != "ended":
        return _missing("batch results")
    data = "\n".join(json.dumps(r) for r in batch.results) + "\n"
    return Response(data, media_type="application/x-jsonl")


async def control(request: Request) -> Response:
    store = sim_batches(request)
    if request.method == "PUT":
        body = json.loads(await request.body())
        if "delay_s" in body:
            store.delay_s = float(body["delay_s"])
        if "failed_custom_ids" in body:
            store.failed = set(body["failed_custom_ids"])
    return JSONResponse({"delay_s": store.delay_s, "failed_custom_ids": sorted(store.failed),
                         "files_uploaded": store.uploads, "batches_created": store.created})


def routes() -> list[Route]:
    out = [Route("/_sim/batches", control, methods=["GET", "PUT"])]
    for p in ("", "/{provider}"):
        out += [
            Route(f"{p}/v1/files", upload, methods=["POST"]),
            Route(f"{p}/v1/files/{{file_id}}/content", content, methods=["GET"]),
            Route(f"{p}/v1/batches", create, methods=["POST"]),
            Route(f"{p}/v1/batches/{{batch_id}}", one, methods=["GET"]),
            Route(f"{p}/v1/batches/{{batch_id}}/cancel", cancel, methods=["POST"]),
            Route(f"{p}/v1/messages/batches", create_messages, methods=["POST"]),
            Route(f"{p}/v1/messages/batches/{{batch_id}}", one_messages, methods=["GET"]),
            Route(f"{p}/v1/messages/batches/{{batch_id}}/results", results, methods=["GET"]),
            Route(f"{p}/v1/messages/batches/{{batch_id}}/cancel", cancel, methods=["POST"]),
        ]
    return out
