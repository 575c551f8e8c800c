"""The simulator's HTTP side: OpenAI's chat API with latencies, streaming and faults.

Starlette on uvicorn (uvloop + httptools), because the gateway's overhead is measured as
the difference against this server: it must add as little as it can. Routes:

  POST /v1/chat/completions, POST /{provider}/v1/chat/completions
  POST [/{provider}]/v1/completions, /v1/embeddings, /v1/responses   (openai_apis/routes.py)
  POST [/{provider}]/v1/messages                       Anthropic's Messages (native/routes.py)
  POST [/{provider}]/v1beta/models/{model}:generateContent, :streamGenerateContent?alt=sse
  GET  /v1/models, GET /{provider}/v1/models
  GET|PUT|DELETE /_sim/faults      faults at run time (PUT {"model", "kind", ...})
  GET|PUT|DELETE /_sim/behaviour   latency and length overrides per model
  GET /_sim/stats, GET /_sim/requests, POST /_sim/reset, GET /healthz  (control.py)
  Files, Batches and Message Batches, and GET|PUT /_sim/batches            (batches/routes.py)
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import time
from collections.abc import AsyncGenerator

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from gateway.devtools.sim import bodies, control
from gateway.devtools.sim.batches.routes import routes as batch_routes
from gateway.devtools.sim.batches.store import SimBatches
from gateway.devtools.sim.behaviour import ReplyPlan, plan_reply
from gateway.devtools.sim.faults import ActiveFault
from gateway.devtools.sim.native.routes import NativeRoutes
from gateway.devtools.sim.openai_apis.routes import OpenAIRoutes
from gateway.devtools.sim.request import ChatRequest, InvalidRequest, parse_chat_request
from gateway.devtools.sim.responses import (
    JSON,
    TRANSPORT_EXTENSION,
    EventStream,
    NoResponse,
    PartialThenReset,
    abort_connection,
    sleep_unless_disconnected,
    until_disconnected,
)
from gateway.devtools.sim.settings import QUALITY_FAULTS, SimSettings
from gateway.devtools.sim.state import SimState, sim_state

_ERRORS = {
    "error_500": (500, "The server had an error while processing your request.", "server_error"),
    "error_502": (502, "Bad gateway.", "server_error"),
    "error_503": (503, "The engine is currently overloaded, please try again later.",
                  "server_error"),
    "bad_request": (400, "Invalid request (injected by the simulator).",
                    "invalid_request_error"),
}


def _error(status: int, message: str, kind: str, code: str | None = None,
           param: str | None = None, headers: dict[str, str] | None = None) -> Response:
    return Response(bodies.error_body(message, kind, code, param), status, headers,
                    media_type=JSON)


async def _stream(request: Request, plan: ReplyPlan, encoder: bodies.ChunkEncoder,
                  fault: str | None) -> AsyncGenerator[bytes, None]:
    """Chunks at their planned times; those due together leave in one write."""
    state = sim_state(request)
    state.stats.streams_open += 1
    loop = asyncio.get_running_loop()
    start = loop.time()
    try:
        await asyncio.sleep(plan.ttft_s)
        out = [encoder.opening(c) for c in plan.choices]
        if fault == "malformed":
            yield "".join([*out, encoder.broken(), encoder.done]).encode()
            return
        first_at = start + plan.ttft_s
        cut_after = plan.longest // 2 + 1 if fault == "mid_stream_reset" else plan.longest
        step = 0  # pieces sent so far, per choice
        while step < cut_after:
            now = loop.time()
            due = cut_after if plan.per_token_s <= 0 else \
                min(cut_after, int((now - first_at) / plan.per_token_s) + 1)
            if due <= step:
                if out:
                    yield "".join(out).encode()
                    out = []
                await asyncio.sleep(first_at + step * plan.per_token_s - now)
                continue
            for c in plan.choices:
                out.extend(encoder.pieces(c, step, due))
            step = due
        if fault == "mid_stream_reset":
            yield "".join(out).encode()
            await asyncio.sleep(0.01)
            if abort_connection(request.scope):
                await asyncio.sleep(5)  # Starlette cancels us once the disconnect lands
            raise ConnectionAbortedError("simulated reset mid-stream")
        out.extend(encoder.closing(c) for c in plan.choices)
        if encoder.include_usage and fault != "no_usage":
            out.append(encoder.usage(plan))
        out.append(encoder.done)
        yield "".join(out).encode()
    finally:
        state.stats.streams_open -= 1


async def chat_completions(request: Request) -> Response:
    state = sim_state(request)
    stats = state.stats
    stats.in_flight += 1
    try:
        response = await _chat(request, state)
    finally:
        stats.in_flight -= 1
    stats.statuses[response.status_code] += 1
    return response


async def _chat(request: Request, state: SimState) -> Response:
    raw = await request.body()
    try:
        body = json.loads(raw)
    except ValueError:
        return _error(400, "We could not parse the JSON body of your request.",
                      "invalid_request_error")
    try:
        chat = parse_chat_request(body)
    except InvalidRequest as err:
        return _error(400, str(err), "invalid_request_error", param=err.param)
    if state.served and chat.model not in state.served:
        return _error(404, f"The model `{chat.model}` does not exist or you do not have "
                      "access to it.", "invalid_request_error", "model_not_found")
    headers = request.headers
    state.stats.record_request(chat.model, body, request.path_params.get("provider"),
                               list(headers.keys()), headers.get("authorization"))
    fault = state.faults.draw(chat.model, state.rng.random())
    if fault is not None:
        state.stats.faults[f"{chat.model}:{fault.kind}"] += 1
        early = await _early_fault(request, fault)
        if early is not None:
            return early
    return await _answer(request, state, chat, fault.kind if fault else None)


async def _early_fault(request: Request, fault: ActiveFault) -> Response | None:
    """The faults that replace the answer, or delay it; None: answer (maybe broken)."""
    kind = fault.kind
    if kind == "rate_limit":
        wait = fault.spec.retry_after_s
        return _error(429, f"Rate limit reached for {fault.model}. Please try again in "
                      f"{wait:g}s.", "requests", "rate_limit_exceeded",
                      headers={"retry-after": str(math.ceil(wait)),
                               "retry-after-ms": str(round(wait * 1000))})
    if kind in _ERRORS:
        status, message, error_type = _ERRORS[kind]
        return _error(status, message, error_type)
    if kind == "reset":
        if not abort_connection(request.scope):
            raise ConnectionAbortedError("simulated reset")
        await until_disconnected(request.receive)
        return NoResponse()
    if kind == "hang" and not await sleep_unless_disconnected(request, fault.spec.hang_s):
        return NoResponse()
    return None


async def _answer(request: Request, state: SimState, chat: ChatRequest,
                  fault: str | None) -> Response:
    # like OpenAI's `seed`: the same request with the same seed gets the same answer
    rng = state.rng if chat.seed is None else random.Random(chat.seed)
    spoil = fault if fault in QUALITY_FAULTS else None
    plan = plan_reply(chat, state.behaviour(chat.model), rng, state.prompt_cache, spoil)
    request_id = f"chatcmpl-{state.rng.getrandbits(96):024x}"
    created = int(time.time())
    headers = {"x-request-id": request_id}
    if chat.stream:
        encoder = bodies.ChunkEncoder(request_id, created, chat.model, chat.include_usage)
        return EventStream(_stream(request, plan, encoder, fault), headers)
    if not await sleep_unless_disconnected(request, plan.duration_s):
        return NoResponse()
    if fault == "malformed":
        return Response(bodies.malformed_body(request_id, chat.model), headers=headers,
                        media_type=JSON)
    body = bodies.completion_body(request_id, created, chat.model, plan,
                                  with_usage=fault != "no_usage")
    if fault == "mid_stream_reset":
        return PartialThenReset(body)
    return Response(body, headers=headers, media_type=JSON)


async def list_models(request: Request) -> Response:
    return Response(bodies.models_body(sim_state(request).model_ids, 1_700_000_000),
                    media_type=JSON)


async def healthz(request: Request) -> Response:
    # the pid lets a starter check that it reached its own child, not a port squatter
    return JSONResponse({"status": "ok", "pid": os.getpid()})


def build_app(settings: SimSettings, served_models: tuple[str, ...] = ()) -> Starlette:
    """The simulator as an ASGI app. With no served models, any model name is accepted."""
    app = Starlette(routes=[
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        Route("/{provider}/v1/chat/completions", chat_completions, methods=["POST"]),
        Route("/v1/models", list_models, methods=["GET"]),
        Route("/{provider}/v1/models", list_models, methods=["GET"]),
        # Anthropic's Messages and Gemini's generateContent, on the same plans and faults
        *NativeRoutes(_stream, _early_fault).routes(),
        # legacy completions, embeddings and Responses, on the same plans and faults
        *OpenAIRoutes(_stream, _early_fault).routes(),
        Route("/_sim/faults", control.faults, methods=["GET", "PUT", "DELETE"]),
        Route("/_sim/behaviour", control.behaviour, methods=["GET", "PUT", "DELETE"]),
        Route("/_sim/stats", control.stats, methods=["GET"]),
        Route("/_sim/requests", control.recent_requests, methods=["GET"]),
        Route("/_sim/reset", control.reset, methods=["POST"]),
        Route("/healthz", healthz, methods=["GET"]),
        # OpenAI's Files and Batch APIs, Anthropic's Message Batches
        *batch_routes(),
    ])
    app.state.sim = SimState(settings, served_models)
    app.state.sim_batches = SimBatches(settings.batches.delay_s,
                                       settings.batches.failed_custom_ids)
    return app


class _TransportInScope(HttpToolsProtocol):
    """uvicorn's httptools protocol, handing the transport to the app so it can reset it."""

    def on_message_begin(self) -> None:
        super().on_message_begin()
        # uvicorn's scope TypedDict types each extension's value as a dict; ours is the
        # transport itself, which responses.abort_connection reads back
        self.scope["extensions"] = {TRANSPORT_EXTENSION: self.transport}  # type: ignore[dict-item]


def make_server(app: Starlette, host: str, port: int) -> uvicorn.Server:
    config = uvicorn.Config(
        app, host=host, port=port, loop="uvloop", http=_TransportInScope, lifespan="off",
        access_log=False, log_level="warning", backlog=4096, timeout_keep_alive=30,
        # a hanging or slow stream must not hold up Ctrl-C / SIGTERM for minutes
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    app.state.sim.server = server
    return server


def serve(settings: SimSettings, served_models: tuple[str, ...] = (),
          host: str | None = None, port: int | None = None) -> None:
    """Run the simulator in the foreground until interrupted."""
    app = build_app(settings, served_models)
    make_server(app, host or settings.host, port or settings.port).run()
