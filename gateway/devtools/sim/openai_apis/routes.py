"""The simulator's `POST [/{provider}]/v1/completions`, `/v1/embeddings` and
`/v1/responses`: the chat's reply plans (latency, length, tool calls, cached and reasoning
tokens), its fault table and its streaming loop, handed in by `server.build_app` (the
server imports this module, so this module cannot import the server)."""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.devtools.sim import bodies
from gateway.devtools.sim.behaviour import ReplyPlan, plan_reply
from gateway.devtools.sim.faults import ActiveFault
from gateway.devtools.sim.openai_apis import bodies as api_bodies
from gateway.devtools.sim.openai_apis.requests import (
    inputs,
    item_tokens,
    parse_completions,
    parse_responses,
)
from gateway.devtools.sim.request import ChatRequest, InvalidRequest
from gateway.devtools.sim.responses import (
    JSON,
    EventStream,
    NoResponse,
    PartialThenReset,
    sleep_unless_disconnected,
)
from gateway.devtools.sim.state import SimState, sim_state

StreamFn = Callable[[Request, ReplyPlan, Any, str | None], AsyncGenerator[bytes, None]]
EarlyFaultFn = Callable[[Request, ActiveFault], Awaitable[Response | None]]
# what embeddings take: a small share of a chat's first-token time
EMBEDDING_LATENCY_SHARE = 0.25


def _error(status: int, message: str, param: str | None = None,
           code: str | None = None) -> Response:
    return Response(bodies.error_body(message, "invalid_request_error", code, param), status,
                    media_type=JSON)


class OpenAIRoutes:
    def __init__(self, stream: StreamFn, early_fault: EarlyFaultFn) -> None:
        self._stream = stream
        self._early_fault = early_fault

    def routes(self) -> list[Route]:
        out = []
        for prefix in ("", "/{provider}"):
            out.append(Route(f"{prefix}/v1/completions", self.completions, methods=["POST"]))
            out.append(Route(f"{prefix}/v1/embeddings", self.embeddings, methods=["POST"]))
            out.append(Route(f"{prefix}/v1/responses", self.responses, methods=["POST"]))
        return out

    async def _serve(self, request: Request,
                     answer: Callable[[SimState, dict[str, Any], str | None],
                                      Awaitable[Response]],
                     model_of: Callable[[dict[str, Any]], Any]) -> Response:
        """Counted, parsed, checked, recorded and maybe faulted like a chat request."""
        state = sim_state(request)
        state.stats.in_flight += 1
        try:
            response = await self._checked(request, state, answer, model_of)
        finally:
            state.stats.in_flight -= 1
        state.stats.statuses[response.status_code] += 1
        return response

    async def _checked(self, request: Request, state: SimState,
                       answer: Callable[[SimState, dict[str, Any], str | None],
                                        Awaitable[Response]],
                       model_of: Callable[[dict[str, Any]], Any]) -> Response:
        try:
            body = json.loads(await request.body())
        except ValueError:
            return _error(400, "We could not parse the JSON body of your request.")
        if not isinstance(body, dict):
            return _error(400, "The request body must be a JSON object.")
        model = model_of(body)
        if not isinstance(model, str) or not model:
            return _error(400, "You must provide a model parameter.", "model")
        if state.served and model not in state.served:
            return _error(404, f"The model `{model}` does not exist or you do not have access "
                          "to it.", code="model_not_found")
        headers = request.headers
        state.stats.record_request(model, body, request.path_params.get("provider"),
                                   list(headers.keys()), headers.get("authorization"))
        fault = state.faults.draw(model, state.rng.random())
        if fault is not None:
            state.stats.faults[f"{model}:{fault.kind}"] += 1
            early = await self._early_fault(request, fault)
            if early is not None:
                return early
        try:
            return await answer(state, body, fault.kind if fault else None)
        except InvalidRequest as err:
            return _error(400, str(err), err.param)

    async def _plain(self, request: Request, seconds: float, fault: str | None,
                     model: str, body: bytes) -> Response:
        if not await sleep_unless_disconnected(request, seconds):
            return NoResponse()
        if fault == "malformed":
            return Response(bodies.malformed_body("x", model), media_type=JSON)
        if fault == "mid_stream_reset":
            return PartialThenReset(body)
        return Response(body, media_type=JSON)

    def _plan(self, state: SimState, chat: ChatRequest) -> ReplyPlan:
        rng = state.rng if chat.seed is None else random.Random(chat.seed)
        return plan_reply(chat, state.behaviour(chat.model), rng, state.prompt_cache)

    # -- legacy completions ----------------------------------------------------------------

    async def completions(self, request: Request) -> Response:
        async def answer(state: SimState, body: dict[str, Any], fault: str | None) -> Response:
            chat, prompt_tokens = parse_completions(body)
            plan = self._plan(state, chat)
            # a legacy prompt is counted as it is: no chat framing around it
            usage = dataclasses.replace(plan.usage, prompt_tokens=prompt_tokens,
                                        cached_tokens=min(plan.usage.cached_tokens,
                                                          prompt_tokens))
            plan = dataclasses.replace(plan, usage=usage)
            request_id = f"cmpl-{state.rng.getrandbits(96):024x}"
            created = api_bodies.now()
            if chat.stream:
                encoder = api_bodies.CompletionsEncoder(request_id, created, chat.model,
                                                        chat.include_usage)
                return EventStream(self._stream(request, plan, encoder, fault), {})
            return await self._plain(request, plan.duration_s, fault, chat.model,
                                     api_bodies.completion_body(request_id, created,
                                                                chat.model, plan,
                                                                fault != "no_usage"))

        return await self._serve(request, answer, lambda b: b.get("model"))

    # -- Responses -------------------------------------------------------------------------

    async def responses(self, request: Request) -> Response:
        async def answer(state: SimState, body: dict[str, Any], fault: str | None) -> Response:
            chat = parse_responses(body)
            plan = self._plan(state, chat)
            response_id = f"resp_{state.rng.getrandbits(96):024x}"
            item_id = f"msg_{state.rng.getrandbits(96):024x}"
            created = api_bodies.now()
            if chat.stream:
                encoder = api_bodies.ResponsesEncoder(response_id, created, chat.model, item_id)
                return EventStream(self._stream(request, plan, encoder, fault), {})
            return await self._plain(request, plan.duration_s, fault, chat.model,
                                     api_bodies.response_body(response_id, created, chat.model,
                                                              plan, fault != "no_usage",
                                                              item_id))

        return await self._serve(request, answer, lambda b: b.get("model"))

    # -- embeddings ------------------------------------------------------------------------

    async def embeddings(self, request: Request) -> Response:
        async def answer(state: SimState, body: dict[str, Any], fault: str | None) -> Response:
            model = str(body["model"])
            items = inputs(body.get("input"), "input")
            dimensions = body.get("dimensions") or api_bodies.DIMENSIONS.get(
                model, api_bodies.DEFAULT_DIMENSIONS)
            if isinstance(dimensions, bool) or not isinstance(dimensions, int) \
                    or dimensions < 1:
                raise InvalidRequest("Invalid 'dimensions': expected an integer >= 1.",
                                     "dimensions")
            encoding = body.get("encoding_format") or "float"
            if encoding not in ("float", "base64"):
                raise InvalidRequest("Invalid 'encoding_format'.", "encoding_format")
            tokens = sum(item_tokens(i) for i in items)
            behaviour = state.behaviour(model)
            seconds = behaviour.ttft_ms * EMBEDDING_LATENCY_SHARE / 1000
            out = api_bodies.embeddings_body(model, items, dimensions, encoding, tokens)
            if fault == "no_usage":
                out = json.dumps({k: v for k, v in json.loads(out).items() if k != "usage"}
                                 ).encode()
            return await self._plain(request, seconds, fault, model, out)

        return await self._serve(request, answer, lambda b: b.get("model"))
