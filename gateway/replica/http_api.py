"""The HTTP surface: OpenAI's routes plus health, readiness, metrics and routing info.

Built around a `GatewayService` so that the Serve ingress and a plain uvicorn server
(tests, the overhead baseline) serve exactly the same app.

Who may call what: `/v1/*` takes the same keys as chat completions (and lists only the
models a scoped key may use); `/costgate/routing` and
`/costgate/replicas` want an admin key; `/metrics` wants
the bearer token named by `gateway.metrics_token_env`, and refuses every scrape when none
is configured on an address beyond loopback; `/openapi.json` wants a gateway key;
`/v1/organization/*` (usage and costs) wants an admin key;
`/healthz` and `/readyz` are open and say nothing about the process.
"""

from __future__ import annotations

import hmac
import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Message, Receive, Scope, Send

from gateway.batches.anthropic_routes import anthropic_router
from gateway.batches.api import BatchApi
from gateway.batches.openai_routes import openai_router
from gateway.domain.endpoints import Endpoint
from gateway.domain.environment import is_loopback, secret_from_env
from gateway.domain.openai_errors import OpenAIError
from gateway.replica.auth import Caller, bearer_token
from gateway.replica.endpoints.answers import json_error
from gateway.replica.feedback.route import FeedbackApi
from gateway.replica.messages.count_tokens import CountTokensRoute
from gateway.replica.messages.route import MessagesRoute
from gateway.replica.service import GatewayService
from gateway.replica.usage_api.route import UsageApi

log = logging.getLogger("costgate.http")
MetricsRenderer = Callable[[], Awaitable[tuple[bytes, str]]]
# every live replica's record writer (buffer, spool, alive), by Serve replica id
LedgerReport = Callable[[], Awaitable[dict[str, dict[str, float]]]]
Handler = Callable[[Request], Awaitable[Response]]


def _visible(service: GatewayService, caller: Caller) -> list[dict[str, Any]]:
    """The model list as this caller may use it: a scoped key sees its own models only."""
    entries: list[dict[str, Any]] = service.list_models()["data"]
    allowed = caller.scope.models
    return entries if allowed is None else [e for e in entries if e["id"] in allowed]


def build_app(
    service: GatewayService,
    *,
    render_metrics: MetricsRenderer | None = None,
    replica_ledgers: LedgerReport | None = None,
    usage_api: UsageApi | None = None,
    feedback_api: FeedbackApi | None = None,
    batch_api: BatchApi | None = None,
) -> FastAPI:
    app = FastAPI(
        title="costgate",
        description="An OpenAI-compatible LLM gateway with a cost ledger.",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
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

    # registered with FastAPI too: its OpenAPI schema (what `costgate chaos` fuzzes) lists
    # them, and an app without the fast path (below) serves them as before
    for path, handler in api_routes(service).items():
        app.add_api_route(path, handler, methods=["POST"])

    # Files, Batch and Message Batches (docs/BATCHES.md); no ledger: a 503
    app.include_router(openai_router(batch_api, service.keys.identify))
    app.include_router(anthropic_router(batch_api, service.keys.identify))

    @app.get("/v1/models")
    async def models(request: Request) -> JSONResponse:
        caller = await service.keys.identify(request.headers.get("authorization"))
        return JSONResponse({**service.list_models(), "data": _visible(service, caller)})

    @app.get("/v1/models/{model_id:path}")
    async def model(model_id: str, request: Request) -> JSONResponse:
        caller = await service.keys.identify(request.headers.get("authorization"))
        for entry in _visible(service, caller):
            if entry["id"] == model_id:
                return JSONResponse(entry)
        raise OpenAIError(
            404, f"The model {model_id[:80]!r} does not exist.", code="model_not_found"
        )

    # OpenAI's admin Usage and Costs API, from the ledger (docs/USAGE_API.md); without a
    # ledger (usage_api None) an admin gets a 503
    usage = usage_api or UsageApi(service.keys, None)

    @app.get("/v1/organization/usage/completions")
    async def usage_completions(request: Request) -> Response:
        return await usage(request, "completions")

    @app.get("/v1/organization/usage/embeddings")
    async def usage_embeddings(request: Request) -> Response:
        return await usage(request, "embeddings")

    @app.get("/v1/organization/costs")
    async def costs(request: Request) -> Response:
        return await usage(request, "costs")

    @app.get("/openapi.json", include_in_schema=False)
    async def openapi(request: Request) -> JSONResponse:
        # the schema names every route and field: for key holders, not for whoever
        # reaches the port (keys off, `anonymous` is no key holder either)
        if not _presented_key(request):
            raise OpenAIError(401, "Missing or invalid gateway key: send Authorization: "
                              "Bearer <key>.", code="invalid_api_key")  # fmt: skip
        await service.keys.identify(request.headers.get("authorization"))
        return JSONResponse(app.openapi())
    # an app's score for one of its requests (docs/QUALITY.md); no ledger: a 503
    feedback = feedback_api or FeedbackApi(service.keys, None)

    @app.post("/v1/feedback")
    async def post_feedback(request: Request) -> Response:
        return await feedback(request)

    @app.get("/healthz")
    async def healthz() -> JSONResponse:
        # no PID or anything else about the process: anyone who reaches the port may ask
        return JSONResponse({"status": "ok"})

    @app.get("/readyz")
    async def readyz() -> JSONResponse:
        # the ledger's part (a dead writer, a spool that cannot be written) comes from the
        # provider the ingress set; a database outage alone is not a reason: rows spool
        try:
            reasons = list(service.readiness())
        except Exception as err:  # noqa: BLE001 - a check that cannot tell says not ready
            reasons = [f"readiness check failed ({type(err).__name__})"]
        ok = service.ready and not reasons
        body: dict[str, Any] = {
            "status": "ready" if ok else "not_ready" if service.ready else "starting",
            "models": len(service.cfg.models),
            "aliases": len(service.cfg.aliases),
            "routing_version": service.routing.version,
        }
        if reasons:
            body["reasons"] = reasons
        return JSONResponse(body, status_code=200 if ok else 503)

    @app.get("/costgate/routing")
    async def routing(request: Request) -> JSONResponse:
        """This replica's live routing settings: what a routing change waits to see. The
        PID tells replicas apart for that wait (`gateway.control.routing_update`)."""
        await service.keys.identify_admin(request.headers.get("authorization"))
        return JSONResponse(
            {"pid": os.getpid(), "routing": service.routing.model_dump(mode="json")}
        )

    if replica_ledgers is not None:
        report = replica_ledgers

        @app.get("/costgate/replicas")
        async def replicas(request: Request) -> JSONResponse:
            """Each live replica's ledger writer (`costgate status`): admin key only."""
            await service.keys.identify_admin(request.headers.get("authorization"))
            try:
                ledgers = await report()
            except Exception as err:  # noqa: BLE001 - the hub is away: say so, briefly
                raise OpenAIError(
                    503, f"metrics hub unavailable ({type(err).__name__})", code="metrics"
                ) from None
            return JSONResponse({"replicas": ledgers})

    if render_metrics is not None:
        renderer = render_metrics
        gateway = service.cfg.gateway
        check_token = _metrics_token_check(gateway.metrics_token_env, gateway.host)

        @app.get("/metrics")
        async def metrics(request: Request) -> Response:
            check_token(request.headers.get("authorization"))
            body, content_type = await renderer()
            return Response(body, media_type=content_type)

    return app


class FastRoutes:
    """The ASGI app a replica serves: POSTs to the API routes go straight to their handler,
    everything else (health, models, metrics, errors of routing itself) to FastAPI.

    FastAPI's middleware, router and dependency machinery took about a sixth of a
    replica's CPU per request at 64 concurrent requests (docs/PERFORMANCE.md) and do
    nothing for these routes: they take the raw request and return a Response. What they
    did that a client can see is kept: an `OpenAIError` becomes its OpenAI-shaped answer,
    anything else a plain 500 (and is raised on for Serve to log), as Starlette does.
    """

    def __init__(self, app: FastAPI, routes: dict[str, Handler]) -> None:
        self.app = app
        self._routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            handler = self._routes.get(_route_path(scope))
            if handler is not None:
                await _serve(handler, scope, receive, send)
                return
        await self.app(scope, receive, send)


def _route_path(scope: Scope) -> str:
    # as Starlette's router matches: the path below the app's mount point
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    return path[len(root):] if root and path.startswith(root) else path


async def _serve(handler: Handler, scope: Scope, receive: Receive, send: Send) -> None:
    started = False

    async def tracked(message: Message) -> None:
        nonlocal started
        started = started or message["type"] == "http.response.start"
        await send(message)

    try:
        try:
            response = await handler(Request(scope, receive, send))
        except OpenAIError as err:
            response = json_error(err)
        await response(scope, receive, tracked)
    except Exception:
        if not started:
            await PlainTextResponse("Internal Server Error", status_code=500)(scope, receive, send)
        raise


def serve_app(
    service: GatewayService,
    *,
    render_metrics: MetricsRenderer | None = None,
    replica_ledgers: LedgerReport | None = None,
    usage_api: UsageApi | None = None,
    feedback_api: FeedbackApi | None = None,
    batch_api: BatchApi | None = None,
) -> FastRoutes:
    """The app a replica serves (and the tests' plain servers): FastAPI behind the fast
    path for the API routes."""
    app = build_app(service, render_metrics=render_metrics, replica_ledgers=replica_ledgers,
                    usage_api=usage_api, feedback_api=feedback_api,
                    batch_api=batch_api)  # fmt: skip
    return FastRoutes(app, api_routes(service))


def api_routes(service: GatewayService) -> dict[str, Handler]:
    """OpenAI's and Anthropic's POST routes, by path: the request path of every call."""
    messages_route = MessagesRoute(service)
    count_tokens_route = CountTokensRoute(service)

    async def chat_completions(request: Request) -> Response:
        return await service.chat(request)

    async def completions(request: Request) -> Response:
        return await service.chat(request, Endpoint.COMPLETIONS)

    async def embeddings(request: Request) -> Response:
        return await service.chat(request, Endpoint.EMBEDDINGS)

    async def responses(request: Request) -> Response:
        return await service.chat(request, Endpoint.RESPONSES)

    async def messages(request: Request) -> Response:
        return await messages_route(request)

    async def count_tokens(request: Request) -> Response:
        return await count_tokens_route(request)

    return {
        "/v1/chat/completions": chat_completions,
        "/v1/completions": completions,
        "/v1/embeddings": embeddings,
        "/v1/responses": responses,
        "/v1/messages": messages,
        "/v1/messages/count_tokens": count_tokens,
    }


def _presented_key(request: Request) -> bool:
    return bearer_token(request.headers.get("authorization")) is not None


def _metrics_token_check(token_env: str | None, host: str) -> Callable[[str | None], None]:
    """What /metrics asks of a scraper: the configured variable's value; nothing only on
    a loopback bind without one. Beyond loopback, no token configured refuses every
    scrape: spend per app and app names are not for whoever reaches the port."""
    if token_env is None and is_loopback(host):
        return lambda _: None
    expected = "" if token_env is None else (secret_from_env(token_env) or "").strip()
    if token_env is None:
        log.warning("gateway.host %s is beyond loopback and gateway.metrics_token_env is "
                    "not set: /metrics refuses all", host)  # fmt: skip
    elif not expected:
        # configured but empty: refuse every scrape rather than serve them all unasked
        log.warning("gateway.metrics_token_env names %s, which is unset: /metrics refuses all",
                    token_env)

    def check(authorization: str | None) -> None:
        given = bearer_token(authorization) or ""
        if not expected or not hmac.compare_digest(given.encode(), expected.encode()):
            raise OpenAIError(
                401, "/metrics needs Authorization: Bearer <metrics token>.", code="invalid_token"
            )

    return check
