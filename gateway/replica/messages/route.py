"""`POST /v1/messages`: one Messages request from auth to record, on the chat path's parts.

Auth takes Anthropic's `x-api-key` or a Bearer key (the same gateway keys); routing,
scopes, the attempt loop with its retries, fallbacks and breakers, pricing and the one
ledger record are the chat path's own (`GatewayService`), with the endpoint `messages`.
Each attempt speaks its model's upstream: an Anthropic provider gets the body as it came
(cache_control, thinking and the client's `anthropic-version` included) and its answer
passes back untouched but for the model name; any other provider gets the request
translated to chat completions and its answer translated back.
"""

from __future__ import annotations

import asyncio
import functools
import time
import uuid
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from gateway.domain.config import Model
from gateway.domain.endpoints import Endpoint
from gateway.domain.openai_errors import OpenAIError
from gateway.domain.pricing import TokenUsage
from gateway.domain.usage_record import RequestStatus
from gateway.providers.adapter import StreamParser
from gateway.providers.anthropic import AnthropicAdapter
from gateway.providers.anthropic_replies import completion_to_message
from gateway.providers.anthropic_requests import estimate_messages, messages_to_chat
from gateway.providers.client import UpstreamReply, WireBuilder
from gateway.providers.messages_stream import ChatToMessagesStream
from gateway.providers.registry import adapter_for
from gateway.replica.cache.gate import CacheTicket
from gateway.replica.chat_request import parse_json_body
from gateway.replica.endpoints.answers import REQUEST_ID_HEADER
from gateway.replica.endpoints.attribution import attribute
from gateway.replica.endpoints.billable import check_priceable
from gateway.replica.endpoints.context_fit import fit_context
from gateway.replica.endpoints.spec import serving_plan
from gateway.replica.exchange import Exchange, utcnow
from gateway.replica.key_scope import check_request
from gateway.replica.messages.errors import error_response
from gateway.replica.messages.relay import MESSAGES_FORMAT, MessagesStream
from gateway.replica.messages.request import validate_messages_request
from gateway.replica.objects.references import created
from gateway.replica.request_body import read_body
from gateway.replica.service import GatewayService
from gateway.replica.stream_relay import OpenedStream, read_first_event, relay, relay_response
from gateway.replica.usage_accounting import Accounted, account

_PASSED_HEADERS = ("anthropic-version", "anthropic-beta")


def authorization(request: Request) -> str | None:
    """Anthropic's SDKs send `x-api-key`; OpenAI-minded clients a Bearer key."""
    key = request.headers.get("x-api-key")
    return f"Bearer {key.strip()}" if key else request.headers.get("authorization")


class MessagesRoute:
    def __init__(self, service: GatewayService) -> None:
        self.service = service

    async def __call__(self, request: Request) -> Response:
        svc = self.service
        started, started_at = time.perf_counter(), utcnow()
        try:
            caller = await svc.keys.identify(authorization(request))
        except OpenAIError as err:
            return error_response(err)  # no record, as for chat
        ex = Exchange(request_id=uuid.uuid4(), started=started, started_at=started_at,
                      caller=caller, requested="", endpoint=Endpoint.MESSAGES)
        svc.hooks.inflight(1)
        streaming = False
        try:
            try:
                response = await self._messages(request, ex)
            except OpenAIError as err:
                svc._finish_error(ex, err)
                headers = {REQUEST_ID_HEADER: str(ex.request_id)} | svc.rate_headers(ex)
                return error_response(err, headers)
            except asyncio.CancelledError:
                svc._finish(ex, RequestStatus.CANCELLED, 499, "client_disconnected",
                            self._estimate(ex, ""))
                raise
            streaming = response.media_type == "text/event-stream"
            return response
        finally:
            if not streaming:
                svc.hooks.inflight(-1)
                if ex.admission is not None:
                    ex.admission.release()  # a no-op once settled; else nothing was spent

    def _estimate(self, ex: Exchange, text: str, reported: TokenUsage | None = None
                  ) -> Accounted:
        """The reported usage, else an estimate from the Messages body and the text seen."""
        body = ex.request.body if ex.request else None
        return account(reported, messages=estimate_messages(body) if body else None,
                       completion=text,
                       model=ex.model.upstream_model if ex.model else None)

    async def _messages(self, request: Request, ex: Exchange) -> Response:
        svc = self.service
        limit = svc.cfg.gateway.max_body_bytes
        req = validate_messages_request(parse_json_body(await read_body(request, limit), limit))
        ex.request, ex.requested, ex.stream = req, req.model, req.stream
        ex.attribution = attribute(Endpoint.MESSAGES, request.headers, req.body,
                                   ex.caller.tags, svc.end_users)  # fmt: skip
        check_request(ex.caller.scope, req, request.headers, Endpoint.MESSAGES)
        await svc.objects.check_request(ex.caller.app, Endpoint.MESSAGES, req.body)
        check_priceable(Endpoint.MESSAGES, req.body)
        # as on the chat path: before routing and admission (a hit needs neither)
        ticket = await svc.cache.lookup(ex, request.headers, MESSAGES_FORMAT)
        if ticket.response is not None:
            return ticket.response
        # an embedding model (or one whose adapter serves no Messages) is the client's 400
        ex.plan = serving_plan(svc._plan(req.model, request.headers), Endpoint.MESSAGES,
                               svc.cfg, req.model)
        ex.plan = fit_context(ex, ex.plan, svc.cfg, request.headers)  # may trim ex.request
        await svc._admit(ex, estimate_messages(ex.request.body))  # budgets, limits as everywhere
        passed = {h: request.headers[h] for h in _PASSED_HEADERS if request.headers.get(h)}
        if req.stream:
            return ticket.tag(await self._stream(ex, passed, ticket))
        return ticket.tag(await self._complete(ex, passed, ticket))

    def _upstream(self, model: Model, ex: Exchange, passed: dict[str, str]
                  ) -> tuple[dict[str, Any], WireBuilder | None, AnthropicAdapter | None]:
        """The body for this attempt's upstream, and the native builder if it is Anthropic."""
        assert ex.request is not None
        adapter = adapter_for(self.service.cfg.provider(model.provider))
        if isinstance(adapter, AnthropicAdapter):
            body = dict(ex.request.body)
            body["model"] = model.upstream_model
            build = functools.partial(adapter.messages_request,
                                      version=passed.get("anthropic-version"),
                                      beta=passed.get("anthropic-beta"))
            return body, build, adapter
        chat = messages_to_chat(ex.request.body)
        chat["model"] = model.upstream_model
        if ex.request.stream:
            chat["stream_options"] = {"include_usage": True}
        return chat, None, None

    async def _complete(self, ex: Exchange, passed: dict[str, str], ticket: CacheTicket
                        ) -> Response:
        svc = self.service

        async def call(model: Model) -> tuple[UpstreamReply, bool]:
            body, build, native = self._upstream(model, ex, passed)
            parse = native.parse_messages if native else None
            return await svc.upstream.complete(model, body, build, parse), native is not None

        reply, native = await svc._attempts(ex, call)
        if native:
            body = reply.reply.body
            body["model"] = ex.requested
        else:
            body = completion_to_message(reply.reply.body, reply.reply.usage, ex.requested)
        accounted = self._estimate(ex, reply.reply.text, reply.reply.usage)
        svc._finish(ex, RequestStatus.OK, 200, None, accounted)
        await svc.objects.record(ex.caller.app, created(Endpoint.MESSAGES, body))
        response = JSONResponse(body, headers=svc._headers(ex))
        ticket.store_body(body, response.body, accounted)
        return response

    async def _stream(self, ex: Exchange, passed: dict[str, str], ticket: CacheTicket
                      ) -> Response:
        svc = self.service

        async def call(model: Model) -> tuple[OpenedStream, MessagesStream]:
            body, build, native = self._upstream(model, ex, passed)
            provider = svc.cfg.provider(model.provider)
            parser: MessagesStream = native.messages_stream_parser() if native else \
                ChatToMessagesStream(adapter_for(provider).stream_parser(), ex.requested)
            response = await svc.upstream.open_stream(model, body, build)
            # up to the first event before answering 200, as chat does
            return await read_first_event(response, provider), parser

        opened, parser = await svc._attempts(ex, call)
        await svc.objects.record_opened(ex.caller.app, ex.endpoint, opened.first, opened.response)
        assert ex.model is not None
        response = opened.response

        def on_end(status: RequestStatus, http_status: int, error_class: str | None,
                   ended: StreamParser) -> None:
            svc.hooks.inflight(-1)
            accounted = self._estimate(ex, ended.text(), ended.usage)
            svc._finish(ex, status, http_status, error_class, accounted)
            ticket.store_stream(status, accounted)

        def on_abandon() -> None:
            svc.hooks.inflight(-1)
            svc._finish(ex, RequestStatus.CANCELLED, 200, "client_disconnected",
                        self._estimate(ex, ""))
            asyncio.get_running_loop().create_task(response.aclose())

        stream = relay(ex, response, opened.raw, opened.decoder, opened.first, parser,
                       svc.cfg.provider(ex.model.provider), on_end, ticket.tee(MESSAGES_FORMAT))
        return relay_response(stream, ex, on_abandon=on_abandon, headers=svc._headers(ex))
