"""The HTTP surface: OpenAI's routes plus health, readiness, metrics and routing info.

Built around a `GatewayService` so that the Serve ingress and a plain uvicorn server
(tests, the overhead baseline) serve exactly the same app.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from gateway.domain.openai_errors import OpenAIError
from gateway.replica.service import GatewayService, json_error

MetricsRenderer = Callable[[], Awaitable[tuple[bytes, str]]]


def build_app(
    service: GatewayService,
    *,
    render_metrics: MetricsRenderer | None = None,
) -> FastAPI:
    app = FastAPI(
        title="costgate",
        description="An OpenAI-compatible LLM gateway with a cost ledger.",
        docs_url=None,
        redoc_url=None,
    )

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, exc: StarletteHTTPException) -> Response:
        message = {404: "Unknown route.", 405: "Method not allowed."}.get(
            exc.status_code, str(exc.detail)
        )
        return json_error(OpenAIError(exc.status_code, message, code="invalid_route"))

    @app.exception_handler(OpenAIError)
    async def _openai_error(_: Request, exc: OpenAIError) -> Response:
        return json_error(exc)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        return await service.chat(request)

    @app.get("/v1/models")
    async def models() -> JSONResponse:
        return JSONResponse(service.list_models())

    @app.get("/v1/models/{model_id:path}")
    async def model(model_id: str) -> JSONResponse:
        for entry in service.list_models()["data"]:
            if entry["id"] == model_id:
                return JSONResponse(entry)
        raise OpenAIError(404, f"The model {model_id!r} does not exist.", code="model_not_found")

    @app.get("/healthz")
    async def healthz() -> JSONResponse:
        return JSONResponse({"status": "ok", "pid": os.getpid()})

    @app.get("/readyz")
    async def readyz() -> JSONResponse:
        ok = service.ready
        body = {
            "status": "ready" if ok else "starting",
            "models": len(service.cfg.models),
            "aliases": len(service.cfg.aliases),
            "routing_version": service.routing.version,
        }
        return JSONResponse(body, status_code=200 if ok else 503)

    @app.get("/costgate/routing")
    async def routing() -> JSONResponse:
        """This replica's live routing settings: what a routing change waits to see."""
        return JSONResponse(
            {"pid": os.getpid(), "routing": service.routing.model_dump(mode="json")}
        )

    if render_metrics is not None:
        renderer = render_metrics

        @app.get("/metrics")
        async def metrics() -> Response:
            body, content_type = await renderer()
            return Response(body, media_type=content_type)

    return app
