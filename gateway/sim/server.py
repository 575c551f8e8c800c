"""The simulator's HTTP side: OpenAI's chat API, streaming, faults and a control API.

Starlette on uvicorn (uvloop + httptools), because the gateway's overhead is measured as
the difference against this server: it must add as little as it can. Routes:

  POST /v1/chat/completions, POST /{provider}/v1/chat/completions
  GET  /v1/models, GET /{provider}/v1/models
  GET|PUT|DELETE /_sim/faults      faults at run time (PUT {"model", "kind", ...})
  GET|PUT|DELETE /_sim/behaviour   latency and length overrides per model
  GET /_sim/stats, GET /_sim/requests, POST /_sim/reset, GET /healthz
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import socket
import struct
import time
from collections.abc import AsyncGenerator
from typing import Any

import uvicorn
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from gateway.sim import bodies
from gateway.sim.behaviour import PromptCache, ReplyPlan, plan_reply
from gateway.sim.faults import ActiveFault, FaultTable
from gateway.sim.request import ChatRequest, InvalidRequest, parse_chat_request
from gateway.sim.settings import (
    FAULT_KINDS,
    Behaviour,
    BehaviourOverride,
    FaultSpec,
    SimSettings,
)
from gateway.sim.stats import SimStats

TRANSPORT_EXTENSION = "costgate.sim.transport"
JSON = "application/json"
_ERRORS = {
    "error_500": (500, "The server had an error while processing your request.", "server_error"),
    "error_502": (502, "Bad gateway.", "server_error"),
    "error_503": (503, "The engine is currently overloaded, please try again later.",
                  "server_error"),
    "bad_request": (400, "Invalid request (injected by the simulator).",
                    "invalid_request_error"),
}


class SimState:
    """Everything the routes share; one per app, touched only from the event loop."""

    def __init__(self, settings: SimSettings, served_models: tuple[str, ...]):
        self.settings = settings
        self.served = frozenset(served_models)
        self.model_ids = list(served_models)
        self.faults = FaultTable(settings.faults)
        self.stats = SimStats()
        self.prompt_cache = PromptCache(settings.prompt_cache_min_tokens)
        self.rng = random.Random(settings.seed)
        self.overrides: dict[str, BehaviourOverride] = {}
        self._behaviours: dict[str, Behaviour] = {}
        self.server: uvicorn.Server | None = None

    def behaviour(self, model: str) -> Behaviour:
        found = self._behaviours.get(model)
        if found is None:
            found = self.settings.behaviour(model).merged(self.overrides.get(model))
            self._behaviours[model] = found
        return found

    def override(self, model: str, override: BehaviourOverride | None) -> None:
        if override is None:
            self.overrides.pop(model, None)
        else:
            old = self.overrides.get(model)
            merged = {**(old.model_dump(exclude_none=True) if old else {}),
                      **override.model_dump(exclude_none=True)}
            self.overrides[model] = BehaviourOverride(**merged)
        self._behaviours.clear()

    def reset(self) -> None:
        self.faults.reset()
        self.stats.reset()
        self.prompt_cache.clear()
        self.overrides.clear()
        self._behaviours.clear()

    def connections_open(self) -> int | None:
        return len(self.server.server_state.connections) if self.server else None


def _state(request: Request) -> SimState:
    return request.app.state.sim


def _error(status: int, message: str, kind: str, code: str | None = None,
           param: str | None = None, headers: dict[str, str] | None = None) -> Response:
    return Response(bodies.error_body(message, kind, code, param), status, headers,
                    media_type=JSON)


class _NoResponse(Response):
    """For a connection already aborted: there is nobody to answer."""

    def __init__(self) -> None:
        # nginx's "client closed request": how the stats count requests nobody got back
        super().__init__(status_code=499)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        return None


def _abort(scope: Scope) -> bool:
    """Reset the client's TCP connection (RST, not FIN); False if the server can't."""
    transport = scope.get("extensions", {}).get(TRANSPORT_EXTENSION)
    if transport is None:
        return False
    sock = transport.get_extra_info("socket")
    if sock is not None:
        # linger 0: close() sends RST, so the client sees "connection reset by peer"
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()
    return True


async def _until_disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _sleep_unless_disconnected(request: Request, seconds: float) -> bool:
    """Sleep; False as soon as the client goes away (a hang must not outlive its client)."""
    if seconds <= 0:
        return True
    watcher = asyncio.ensure_future(_until_disconnected(request.receive))
    try:
        await asyncio.wait_for(asyncio.shield(watcher), seconds)
        return False
    except TimeoutError:
        return True
    finally:
        watcher.cancel()


class _PartialThenReset(Response):
    """Headers and half of the promised body, then a reset: a connection cut mid-response."""

    def __init__(self, body: bytes):
        super().__init__(body, 200, media_type=JSON)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        await send({"type": "http.response.body", "body": self.body[: len(self.body) // 2],
                    "more_body": True})
        await asyncio.sleep(0.01)  # let the half body leave before the reset
        if _abort(scope):
            await _until_disconnected(receive)
        else:
            raise ConnectionAbortedError("simulated reset")


class _EventStream(Response):
    """SSE from an async iterator, stopped as soon as the client disconnects.

    Starlette's StreamingResponse does the same through an anyio task group, which costs
    more than the rest of a simulated stream; two plain tasks do here.
    """

    media_type = "text/event-stream"

    def __init__(self, chunks: AsyncGenerator[bytes, None], headers: dict[str, str]):
        self.chunks = chunks
        self.status_code = 200
        self.background = None
        self.raw_headers = [(b"content-type", b"text/event-stream; charset=utf-8"),
                            (b"cache-control", b"no-cache"),
                            *((k.encode(), v.encode()) for k, v in headers.items())]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        pump = asyncio.ensure_future(self._pump(send))
        watcher = asyncio.ensure_future(_until_disconnected(receive))
        try:
            await asyncio.wait((pump, watcher), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (pump, watcher):
                task.cancel()
            await asyncio.gather(pump, watcher, return_exceptions=True)
        if pump.done() and not pump.cancelled() and pump.exception() is not None:
            raise pump.exception()  # type: ignore[misc]

    async def _pump(self, send: Send) -> None:
        try:
            async for chunk in self.chunks:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            await self.chunks.aclose()  # its `finally` runs now, not when collected


async def _stream(request: Request, plan: ReplyPlan, encoder: bodies.ChunkEncoder,
                  fault: str | None) -> AsyncGenerator[bytes, None]:
    """Chunks at their planned times; those due together leave in one write."""
    state = _state(request)
    state.stats.streams_open += 1
    loop = asyncio.get_running_loop()
    start = loop.time()
    try:
        await asyncio.sleep(plan.ttft_s)
        out = [encoder.opening(c) for c in plan.choices]
        if fault == "malformed":
            yield "".join([*out, encoder.broken(), bodies.DONE]).encode()
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
            if _abort(request.scope):
                await asyncio.sleep(5)  # Starlette cancels us once the disconnect lands
            raise ConnectionAbortedError("simulated reset mid-stream")
        out.extend(encoder.closing(c) for c in plan.choices)
        if encoder.include_usage and fault != "no_usage":
            out.append(encoder.usage(plan))
        out.append(bodies.DONE)
        yield "".join(out).encode()
    finally:
        state.stats.streams_open -= 1


async def chat_completions(request: Request) -> Response:
    state = _state(request)
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
        if not _abort(request.scope):
            raise ConnectionAbortedError("simulated reset")
        await _until_disconnected(request.receive)
        return _NoResponse()
    if kind == "hang" and not await _sleep_unless_disconnected(request, fault.spec.hang_s):
        return _NoResponse()
    return None


async def _answer(request: Request, state: SimState, chat: ChatRequest,
                  fault: str | None) -> Response:
    plan = plan_reply(chat, state.behaviour(chat.model), state.rng, state.prompt_cache)
    request_id = f"chatcmpl-{state.rng.getrandbits(96):024x}"
    created = int(time.time())
    headers = {"x-request-id": request_id}
    if chat.stream:
        encoder = bodies.ChunkEncoder(request_id, created, chat.model, chat.include_usage)
        return _EventStream(_stream(request, plan, encoder, fault), headers)
    if not await _sleep_unless_disconnected(request, plan.duration_s):
        return _NoResponse()
    if fault == "malformed":
        return Response(bodies.malformed_body(request_id, chat.model), headers=headers,
                        media_type=JSON)
    body = bodies.completion_body(request_id, created, chat.model, plan,
                                  with_usage=fault != "no_usage")
    if fault == "mid_stream_reset":
        return _PartialThenReset(body)
    return Response(body, headers=headers, media_type=JSON)


async def list_models(request: Request) -> Response:
    return Response(bodies.models_body(_state(request).model_ids, 1_700_000_000),
                    media_type=JSON)


async def _json_body(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.body() or b"{}")
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise InvalidRequest("the body must be a JSON object")
    return body


def _control_error(err: Exception) -> Response:
    if isinstance(err, ValidationError):
        message = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors())
    else:
        message = str(err)
    return _error(400, message, "invalid_request_error")


async def faults(request: Request) -> Response:
    state = _state(request)
    if request.method == "PUT":
        try:
            body = await _json_body(request)
            model, kind = body.pop("model", None), body.pop("kind", None)
            if not isinstance(model, str) or kind not in FAULT_KINDS:
                raise InvalidRequest(f"need a model and a kind, one of {', '.join(FAULT_KINDS)}")
            state.faults.set(model, kind, FaultSpec(**body))
        except (InvalidRequest, ValidationError, TypeError) as err:
            return _control_error(err)
    elif request.method == "DELETE":
        state.faults.clear(request.query_params.get("model"), request.query_params.get("kind"))
    return JSONResponse({"faults": state.faults.snapshot()})


async def behaviour(request: Request) -> Response:
    state = _state(request)
    if request.method == "PUT":
        try:
            body = await _json_body(request)
            model = body.pop("model", None)
            if not isinstance(model, str):
                raise InvalidRequest("need a model")
            state.override(model, BehaviourOverride(**body))
        except (InvalidRequest, ValidationError, TypeError) as err:
            return _control_error(err)
    elif request.method == "DELETE":
        model = request.query_params.get("model")
        for name in [model] if model else list(state.overrides):
            state.override(name, None)
    models = sorted(set(state.model_ids) | set(state.overrides))
    return JSONResponse({"default": state.settings.default.model_dump(),
                         "models": {m: state.behaviour(m).model_dump() for m in models}})


async def stats(request: Request) -> Response:
    state = _state(request)
    return JSONResponse(state.stats.snapshot(state.connections_open()))


async def recent_requests(request: Request) -> Response:
    return JSONResponse({"requests": list(_state(request).stats.recent)})


async def reset(request: Request) -> Response:
    _state(request).reset()
    return JSONResponse({"reset": True})


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
        Route("/_sim/faults", faults, methods=["GET", "PUT", "DELETE"]),
        Route("/_sim/behaviour", behaviour, methods=["GET", "PUT", "DELETE"]),
        Route("/_sim/stats", stats, methods=["GET"]),
        Route("/_sim/requests", recent_requests, methods=["GET"]),
        Route("/_sim/reset", reset, methods=["POST"]),
        Route("/healthz", healthz, methods=["GET"]),
    ])
    app.state.sim = SimState(settings, served_models)
    return app


class _TransportInScope(HttpToolsProtocol):
    """uvicorn's httptools protocol, handing the transport to the app so it can reset it."""

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.scope["extensions"] = {TRANSPORT_EXTENSION: self.transport}  # type: ignore[typeddict-unknown-key]


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
