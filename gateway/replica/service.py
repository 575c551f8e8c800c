"""One replica's gateway: auth, routing, the upstream call with retries and fallbacks,
and the ledger record, for every chat completion (and OpenAI's other APIs, whose
differences are data: `gateway.replica.endpoints.spec`).

This is plain asyncio with no Ray in it, so the same object serves the Serve ingress
(`gateway.replica.ingress`) and a plain uvicorn app in tests and benchmarks.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import httpx
from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from gateway.domain import json_codec
from gateway.domain.config import Config, Model
from gateway.domain.endpoints import Endpoint
from gateway.domain.openai_errors import OpenAIError
from gateway.domain.pricing import PriceCatalog
from gateway.domain.routing_settings import RoutingSettings, parse_routing, routing_from_config
from gateway.domain.usage_record import RequestStatus, UsageSource
from gateway.providers.adapter import StreamParser
from gateway.providers.client import UpstreamClient, UpstreamReply
from gateway.providers.registry import adapter_for
from gateway.quota.guard import QuotaGuard, Who
from gateway.quota.syncer import PostgresQuotaStore, QuotaSyncer
from gateway.quota.worst_case import WorstCasePricer
from gateway.replica.attempts import run_attempts
from gateway.replica.auth import KeyRing
from gateway.replica.cache.gate import CacheTicket, ResponseCache
from gateway.replica.chat_request import parse_json_body
from gateway.replica.endpoints.context_fit import fit_context
from gateway.replica.endpoints.spec import SPECS, serving_plan
from gateway.replica.exchange import AttemptHooks, Exchange, RecordSink, utcnow
from gateway.replica.key_scope import check_request
from gateway.replica.model_list import list_models
from gateway.replica.record_builder import build_record
from gateway.replica.request_body import read_body
from gateway.replica.stream_relay import OpenedStream, read_first_event, relay, relay_response
from gateway.replica.usage_accounting import Accounted, account
from gateway.routing.circuit_breaker import BreakerBoard
from gateway.routing.latency_tracker import LatencyTracker
from gateway.routing.policy import (
    Health,
    RouteHeaderError,
    RouteOverrides,
    RoutePlan,
    RouteRefusal,
    effective_prices,
    plan_route,
)

log = logging.getLogger("costgate.gateway")
T = TypeVar("T")

MODEL_HEADER = "x-costgate-model"
PROVIDER_HEADER = "x-costgate-provider"
# Serve sets its own x-request-id on every response, so ours has a name of its own
REQUEST_ID_HEADER = "x-costgate-request-id"
# the replica that answered (Serve's replica tag), for ops tracing a request to its logs
REPLICA_HEADER = "x-costgate-replica"


class GatewayService:
    def __init__(self, cfg: Config, *, sink: RecordSink | None = None,
                 hooks: AttemptHooks | None = None,
                 transport: httpx.AsyncBaseTransport | None = None,
                 keyring: KeyRing | None = None,
                 rng: random.Random | None = None) -> None:  # fmt: skip
        self.cfg = cfg
        self.catalog = PriceCatalog.from_config(cfg)
        self.pricer = WorstCasePricer(cfg, self.catalog)
        self.prices = effective_prices(cfg)
        self.routing: RoutingSettings = routing_from_config(cfg)
        self.upstream = UpstreamClient(cfg, transport=transport)
        self.sink = sink or RecordSink()
        self.hooks = hooks or AttemptHooks()
        self.cache = ResponseCache(cfg, self.catalog, self.sink, self.hooks, self._headers)
        self.keys = keyring or KeyRing(
            require_keys=cfg.gateway.require_keys,
            static_key_envs=cfg.gateway.static_key_envs,
        )
        self.breakers = BreakerBoard(self.routing.breaker)
        self.latency = LatencyTracker()
        self.live_replicas: int | None = None
        # budgets and rate limits: local until `use_quota_store` shares them (a database)
        self.quota = QuotaGuard(shared=False)
        self.limits = self.quota.model_limits
        self.limits.update_caps(self.routing.caps, replicas=self._replicas())
        self.quota_syncer: QuotaSyncer | None = None
        self.rng = rng or random.Random()
        self.replica_id: str | None = None  # set by the Serve ingress; None: no header
        self.ready = True
        # why this replica should take no new traffic (empty: no reason); the ingress
        # points it at the ledger writer's health, which the request path knows nothing of
        self.readiness: Callable[[], tuple[str, ...]] = lambda: ()

    def set_catalog(self, catalog: PriceCatalog) -> None:
        """Price from now on with `catalog` (dated FX rates: `finance/fx_refresh.py`)."""
        self.catalog, self.pricer = catalog, WorstCasePricer(self.cfg, catalog)
        self.cache.catalog = catalog

    def use_quota_store(self, store: PostgresQuotaStore) -> QuotaSyncer:
        """Budgets, key limits and model caps shared by every replica through `store`;
        called before traffic. The caller starts the syncer."""
        self.quota = QuotaGuard(shared=True)
        self.limits = self.quota.model_limits
        self.limits.update_caps(self.routing.caps)
        self.quota_syncer = QuotaSyncer(self.quota, store)
        return self.quota_syncer

    def _replicas(self) -> int:
        """Without a shared store each replica enforces its share of a model's cap: split by
        the replicas that run (as the controller counts them), until known by the most."""
        g = self.cfg.gateway
        most = g.autoscaling.max_replicas if g.autoscaling else g.num_replicas
        return self.live_replicas or most

    def set_live_replicas(self, count: int) -> None:
        if count > 0 and count != self.live_replicas:  # caps split anew
            self.live_replicas = count
            self.limits.update_caps(self.routing.caps, replicas=count)

    # -- live configuration -------------------------------------------------------------

    def apply_user_config(self, user_config: Mapping[str, Any] | None) -> RoutingSettings:
        """Validate first, then swap one reference: requests in flight keep the old plan."""
        settings = parse_routing(dict(user_config) if user_config else None, self.cfg)
        self.breakers.update_settings(settings.breaker)
        self.limits.update_caps(settings.caps, replicas=self._replicas())
        self.routing = settings
        return settings

    # -- routes ---------------------------------------------------------------------------

    def list_models(self) -> dict[str, Any]:
        return list_models(self.cfg, self.routing, self.catalog)

    async def chat(
        self, request: Request, endpoint: Endpoint = Endpoint.CHAT_COMPLETIONS
    ) -> Response:
        started, started_at = time.perf_counter(), utcnow()
        try:
            caller = await self.keys.identify(request.headers.get("authorization"))
        except OpenAIError as err:
            # no record: an unauthenticated caller must not be able to fill the ledger
            return json_error(err)
        ex = Exchange(uuid.uuid4(), started, started_at, caller, "", endpoint=endpoint)
        self.hooks.inflight(1)
        streaming = False
        try:
            try:
                response = await self._chat(request, ex)
            except OpenAIError as err:
                self._finish_error(ex, err)
                return self._error_response(ex, err)
            except asyncio.CancelledError:
                # The client left, or Serve's request timeout passed, before an answer:
                # the provider bills what it started, so the request is recorded now,
                # synchronously (an await here could be cancelled too), then cancelled.
                self._finish_cancelled(ex)
                raise
            streaming = isinstance(response, StreamingResponse)
            return response
        finally:
            if not streaming:
                self.hooks.inflight(-1)
                if ex.admission is not None:
                    ex.admission.release()  # a no-op once settled; else nothing was spent

    async def _chat(self, request: Request, ex: Exchange) -> Response:
        limit = self.cfg.gateway.max_body_bytes
        spec = SPECS[ex.endpoint]
        req = spec.validate(parse_json_body(await read_body(request, limit), limit))
        ex.request, ex.requested, ex.stream = req, req.model, req.stream  # a refusal's row too
        ex.request = req = check_request(ex.caller.scope, req, request.headers, ex.endpoint)
        # before routing and admission: a hit needs no upstream and spends no budget
        if (ticket := await self.cache.lookup(ex, request.headers)).response is not None:
            return ticket.response
        plan = self._plan(req.model, request.headers)
        plan = serving_plan(plan, ex.endpoint, self.cfg, req.model)
        ex.plan = fit_context(ex, plan, self.cfg, request.headers)  # may trim ex.request
        await self._admit(ex)
        if req.stream:
            return ticket.tag(await self._open_stream(ex, ticket))
        return ticket.tag(await self._complete(ex, ticket))

    def _plan(self, requested: str, headers: Mapping[str, str]) -> RoutePlan:
        try:
            overrides = RouteOverrides.from_headers(headers)
        except RouteHeaderError as err:
            raise OpenAIError(400, str(err), param=err.header, code="invalid_header") from None
        latency: dict[str, float] = {}
        if overrides.priority is not None:
            for name in self.cfg.models_by_name:
                figure = self.latency.figures(name).latency_s
                if figure is not None:
                    latency[name] = figure
        health = Health(
            unavailable={model: wait for (_, model), wait in self.breakers.unavailable().items()},
            capped=self.limits.at_cap(),
            latency_s=latency,
        )
        plan = plan_route(
            requested, self.cfg, self.routing, health, self.prices, self.rng, overrides
        )
        if isinstance(plan, RouteRefusal):
            wait = plan.retry_after_header
            raise OpenAIError(plan.status, plan.message, code=plan.reason, param=plan.param,
                              headers={} if wait is None else {"retry-after": wait})  # fmt: skip
        return plan

    async def _admit(self, ex: Exchange, prompt: list[dict[str, Any]] | None = None) -> None:
        """Reserve the worst case on the caller's budgets, key limits and the models' token
        caps (a refusal raises). `prompt`: the input as chat messages, for an API not in
        SPECS (Anthropic's Messages)."""
        assert ex.plan is not None and ex.request is not None
        c, req = ex.caller, ex.request
        key = None if c.key_id is None else str(c.key_id)
        ex.admission, ex.reserved_tokens = await self.quota.reserve(
            Who(c.app, c.team, key, c.rpm_limit, c.tpm_limit), self.pricer, ex.plan.models,
            prompt if prompt is not None else SPECS[ex.endpoint].prompt(req.body),
            max_tokens=req.max_tokens, key_cap=c.scope.max_output_tokens,
            count_tokens=self.limits.counts_tokens(ex.plan.models),
        )

    # -- the attempt loop -----------------------------------------------------------------

    async def _attempts(self, ex: Exchange, call: Callable[[Model], Awaitable[T]]) -> T:
        return await run_attempts(ex, call, cfg=self.cfg, retry=self.routing.retries,
                                  breakers=self.breakers, limits=self.limits, hooks=self.hooks,
                                  rng=self.rng)  # fmt: skip

    # -- non-streaming --------------------------------------------------------------------

    async def _complete(self, ex: Exchange, ticket: CacheTicket) -> Response:
        assert ex.request is not None
        req, spec = ex.request, SPECS[ex.endpoint]

        async def call(model: Model) -> UpstreamReply:
            build, parse = spec.wire(adapter_for(self.cfg.provider(model.provider)))
            body = spec.upstream_body(req, model.upstream_model)
            return await self.upstream.complete(model, body, build, parse)

        reply = (await self._attempts(ex, call)).reply
        body = reply.body
        body["model"] = ex.requested
        accounted = account(
            reply.usage,
            messages=spec.prompt(req.body),
            completion=reply.text,
            model=ex.model.upstream_model if ex.model else None,
        )
        self._finish(ex, *spec.settle(RequestStatus.OK, 200, None, body.get("status")), accounted)
        response = json_response(body, self._headers(ex))
        ticket.store_body(body, response.body, accounted)  # the bytes sent: encoded once
        return response

    # -- streaming ------------------------------------------------------------------------

    async def _open_stream(self, ex: Exchange, ticket: CacheTicket) -> Response:
        assert ex.request is not None
        req, spec = ex.request, SPECS[ex.endpoint]

        async def call(model: Model) -> OpenedStream:
            build, _ = spec.wire(adapter_for(self.cfg.provider(model.provider)))
            body = spec.upstream_body(req, model.upstream_model)
            response = await self.upstream.open_stream(model, body, build)
            return await read_first_event(response, self.cfg.provider(model.provider))

        opened = await self._attempts(ex, call)
        response = opened.response
        assert ex.model is not None and ex.request is not None
        messages, upstream_model = spec.prompt(ex.request.body), ex.model.upstream_model

        def on_end(
            status: RequestStatus, http_status: int, error_class: str | None, parser: StreamParser
        ) -> None:
            self.hooks.inflight(-1)
            # usage the upstream reported is the whole stream's; without it (cancelled,
            # broken), what was relayed so far is counted and marked estimated
            accounted = account(
                parser.usage, messages=messages, completion=parser.text(), model=upstream_model
            )
            outcome = spec.settle(status, http_status, error_class, getattr(parser, "status", None))
            self._finish(ex, *outcome, accounted)
            ticket.store_stream(outcome[0], accounted)

        provider = self.cfg.provider(ex.model.provider)
        stream = relay(
            ex, response, opened.raw, opened.decoder, opened.first,
            spec.stream_parser(adapter_for(provider)), provider, on_end,
            ticket.tee(spec.stream_format),
        )
        return relay_response(
            stream, ex, on_abandon=lambda: self._abandon(ex, response), headers=self._headers(ex)
        )

    def _abandon(self, ex: Exchange, response: httpx.Response) -> None:
        """The client left before the relay started: close upstream, record the request."""
        self.hooks.inflight(-1)
        accounted = account(None, messages=self._prompt(ex), completion="")
        self._finish(ex, RequestStatus.CANCELLED, 200, "client_disconnected", accounted)
        asyncio.get_running_loop().create_task(response.aclose())

    # -- responses and records --------------------------------------------------------------

    def _prompt(self, ex: Exchange) -> list[Any] | None:
        """What an estimate counts of the request's prompt (None before it was read)."""
        return SPECS[ex.endpoint].prompt(ex.request.body) if ex.request else None

    def _headers(self, ex: Exchange) -> dict[str, str]:
        headers = {REQUEST_ID_HEADER: str(ex.request_id)}
        if ex.model is not None:
            headers[MODEL_HEADER] = ex.model.name
            headers[PROVIDER_HEADER] = ex.model.provider
        if self.replica_id is not None:
            headers[REPLICA_HEADER] = self.replica_id
        return headers

    def _error_response(self, ex: Exchange, err: OpenAIError) -> Response:
        headers = {REQUEST_ID_HEADER: str(ex.request_id)} | err.headers
        if ex.model is not None:
            headers[MODEL_HEADER] = ex.model.name
        return Response(
            err.body_bytes(), status_code=err.status, headers=headers, media_type="application/json"
        )

    def _finish_error(self, ex: Exchange, err: OpenAIError) -> None:
        status = RequestStatus.CLIENT_ERROR if err.status < 500 else RequestStatus.UPSTREAM_ERROR
        if err.status == 429 and ex.attempts:
            status = RequestStatus.UPSTREAM_ERROR
        self._finish(ex, status, err.status, err.code, Accounted(None, UsageSource.MISSING))

    def _finish_cancelled(self, ex: Exchange) -> None:
        """A request cut off before its answer: the prompt counts if an upstream saw it."""
        accounted = account(None, messages=self._prompt(ex), completion="")
        self._finish(ex, RequestStatus.CANCELLED, 499, "client_disconnected", accounted)

    def _finish(
        self,
        ex: Exchange,
        status: RequestStatus,
        http_status: int,
        error_class: str | None,
        accounted: Accounted,
    ) -> None:
        if ex.recorded:
            return  # one record per request, whatever else happens to it
        ex.recorded = True
        try:
            record = build_record(
                ex, self.cfg, self.catalog, status, http_status, error_class, accounted
            )
        except Exception:  # noqa: BLE001 - a ledger bug must not fail the client's request
            log.exception("could not build the usage record of %s", ex.request_id)
            if ex.admission is not None:
                ex.admission.release()
            return
        usage = accounted.usage
        used = 0 if usage is None else usage.prompt_tokens + usage.completion_tokens
        if ex.admission is not None:  # synchronous: this may run in a cancelled request
            ex.admission.settle(record.actual_cost_usd, used)
        if ex.model is not None:
            self.limits.settle_tokens(ex.model.name, ex.reserved_tokens, used)
        if ex.model is not None and status is RequestStatus.OK and ex.upstream_ms is not None:
            # the upstream's own time (not our retries and waits) ranks it for `high`/`normal`
            self.latency.observe(ex.model.name, ex.upstream_ms / 1000, _s(record.ttft_ms))
        self.sink(record)

    async def aclose(self) -> None:
        self.keys.stop()
        if self.quota_syncer is not None:
            await self.quota_syncer.stop()
        await self.upstream.aclose()
        await self.cache.aclose()


def _s(ms: int | None) -> float | None:
    return None if ms is None else ms / 1000


def json_response(body: Any, headers: dict[str, str]) -> Response:
    """JSONResponse's bytes, encoded by orjson: every plain answer is re-serialised here."""
    return Response(json_codec.dumps(body), headers=headers, media_type="application/json")


def json_error(err: OpenAIError) -> JSONResponse:
    return JSONResponse(json.loads(err.body_bytes()), status_code=err.status, headers=err.headers)
