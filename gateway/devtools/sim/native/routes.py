"""The simulator's native routes: Anthropic's `POST /v1/messages` and Gemini's
`POST /v1beta/models/{model}:generateContent` / `:streamGenerateContent?alt=sse`, each
also under a provider prefix (`/{provider}/...`), as chat is.

One reply plan per request (`behaviour.plan_reply`), the same fault table, and the
server's own streaming loop and early faults, handed in by `server.build_app` (the server
imports this module, so this module cannot import the server).
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.devtools.sim import bodies
from gateway.devtools.sim.behaviour import ReplyPlan, plan_reply
from gateway.devtools.sim.faults import ActiveFault
from gateway.devtools.sim.native import anthropic, gemini
from gateway.devtools.sim.native.requests import NativeRequest, parse_anthropic, parse_gemini
from gateway.devtools.sim.request import InvalidRequest
from gateway.devtools.sim.responses import (
    JSON,
    EventStream,
    NoResponse,
    PartialThenReset,
    sleep_unless_disconnected,
)
from gateway.devtools.sim.state import SimState, sim_state
from gateway.devtools.sim.tokens import message_tokens

StreamFn = Callable[[Request, ReplyPlan, bodies.ChunkEncoder, str | None],
                    AsyncGenerator[bytes, None]]
EarlyFaultFn = Callable[[Request, ActiveFault], Awaitable[Response | None]]
ErrorBody = Callable[[int, str], bytes]
# Anthropic's smallest cacheable prefix (Sonnet and Opus)
MIN_CACHED_PREFIX = 1024
_ERRORS = {"error_500": 500, "error_502": 502, "error_503": 503, "bad_request": 400}


def _error(error_body: ErrorBody, status: int, message: str,
           headers: dict[str, str] | None = None) -> Response:
    return Response(error_body(status, message), status, headers, media_type=JSON)


def anthropic_cache(native: NativeRequest, plan: ReplyPlan) -> tuple[int, int]:
    """(read, written): Anthropic caches the prefix up to the last cache_control block,
    only when asked; a prefix seen before is read, a new one written."""
    if not native.cache_prefix_messages:
        return 0, 0
    prefix = sum(message_tokens(m) for m in native.chat.messages[:native.cache_prefix_messages])
    if prefix < MIN_CACHED_PREFIX:
        return 0, 0
    return (prefix, 0) if plan.usage.cached_tokens else (0, prefix)


class NativeRoutes:
    def __init__(self, stream: StreamFn, early_fault: EarlyFaultFn) -> None:
        self._stream = stream
        self._early_fault = early_fault

    def routes(self) -> list[Route]:
        out = []
        for prefix in ("", "/{provider}"):
            out.append(Route(f"{prefix}/v1/messages", self.messages, methods=["POST"]))
            for version in ("v1beta", "v1"):  # Gemini serves both
                out.append(Route(f"{prefix}/{version}/models/{{target}}", self.generate,
                                 methods=["POST"]))
        return out

    async def _counted(self, request: Request, handler: Callable[[SimState], Awaitable[Response]]
                       ) -> Response:
        state = sim_state(request)
        state.stats.in_flight += 1
        try:
            response = await handler(state)
        finally:
            state.stats.in_flight -= 1
        state.stats.statuses[response.status_code] += 1
        return response

    async def _fault(self, request: Request, state: SimState, model: str,
                     error_body: ErrorBody) -> tuple[Response | None, str | None]:
        fault = state.faults.draw(model, state.rng.random())
        if fault is None:
            return None, None
        state.stats.faults[f"{model}:{fault.kind}"] += 1
        if fault.kind == "rate_limit":
            wait = fault.spec.retry_after_s
            return _error(error_body, 429, f"Rate limit reached for {model}.",
                          {"retry-after": str(math.ceil(wait))}), fault.kind
        if fault.kind in _ERRORS:
            status = _ERRORS[fault.kind]
            return _error(error_body, status, f"Injected {fault.kind}."), fault.kind
        return await self._early_fault(request, fault), fault.kind

    async def _read(self, request: Request) -> Any:
        try:
            return json.loads(await request.body())
        except ValueError:
            raise InvalidRequest("The request body is not valid JSON.") from None

    # -- Anthropic ---------------------------------------------------------------------------

    async def messages(self, request: Request) -> Response:
        return await self._counted(request, lambda state: self._messages(request, state))

    async def _messages(self, request: Request, state: SimState) -> Response:
        err = anthropic.error_body
        try:
            body = await self._read(request)
            native = parse_anthropic(body)
        except InvalidRequest as bad:
            return _error(err, 400, str(bad))
        chat = native.chat
        if state.served and chat.model not in state.served:
            return _error(err, 404, f"model: {chat.model}")
        # Anthropic's x-api-key, or the Bearer key its newer SDKs send
        key = request.headers.get("x-api-key")
        state.stats.record_request(chat.model, body, request.path_params.get("provider"),
                                   list(request.headers.keys()),
                                   f"Bearer {key}" if key else request.headers.get("authorization"))
        early, fault = await self._fault(request, state, chat.model, err)
        if early is not None:
            return early
        plan = plan_reply(chat, state.behaviour(chat.model), state.rng, state.prompt_cache)
        read, written = anthropic_cache(native, plan)
        usage = None if fault == "no_usage" else anthropic.usage(plan, read, written)
        request_id = f"msg_{state.rng.getrandbits(96):024x}"
        headers = {"request-id": f"req_{request_id[4:]}"}
        if chat.stream:
            encoder = anthropic.MessagesEncoder(request_id, chat.model, plan, usage)
            return EventStream(self._stream(request, plan, encoder, fault), headers)
        return await self._plain(request, plan, fault, headers, chat.model,
                                 anthropic.message_body(request_id, chat.model, plan, usage))

    async def _plain(self, request: Request, plan: ReplyPlan, fault: str | None,
                     headers: dict[str, str], model: str, body: bytes) -> Response:
        if not await sleep_unless_disconnected(request, plan.duration_s):
            return NoResponse()
        if fault == "malformed":
            return Response(bodies.malformed_body("x", model), headers=headers, media_type=JSON)
        if fault == "mid_stream_reset":
            return PartialThenReset(body)
        return Response(body, headers=headers, media_type=JSON)

    # -- Gemini ------------------------------------------------------------------------------

    async def generate(self, request: Request) -> Response:
        return await self._counted(request, lambda state: self._generate(request, state))

    async def _generate(self, request: Request, state: SimState) -> Response:
        err = gemini.error_body
        model, _, action = request.path_params["target"].partition(":")
        if action not in ("generateContent", "streamGenerateContent"):
            return _error(err, 404, f"Unknown method {action!r}.")
        stream = action == "streamGenerateContent"
        if stream and request.query_params.get("alt") != "sse":
            return _error(err, 400, "The simulator streams with alt=sse only.")
        try:
            body = await self._read(request)
            native = parse_gemini(model, body, stream)
        except InvalidRequest as bad:
            return _error(err, 400, str(bad))
        chat = native.chat
        if state.served and model not in state.served:
            return _error(err, 404, f"models/{model} is not found.")
        key = request.headers.get("x-goog-api-key")
        state.stats.record_request(model, {**body, "stream": stream},
                                   request.path_params.get("provider"),
                                   list(request.headers.keys()), f"Bearer {key}" if key else None)
        early, fault = await self._fault(request, state, model, err)
        if early is not None:
            return early
        rng = state.rng if chat.seed is None else random.Random(chat.seed)
        plan = plan_reply(chat, state.behaviour(model), rng, state.prompt_cache)
        response_id = f"{state.rng.getrandbits(72):018x}"
        with_usage = fault != "no_usage"
        if stream:
            encoder = gemini.GenerateEncoder(response_id, model, plan, with_usage)
            return EventStream(self._stream(request, plan, encoder, fault), {})
        return await self._plain(request, plan, fault, {}, model,
                                 gemini.answer_body(response_id, model, plan, with_usage))
