"""One replica's gateway: auth, routing, the upstream call with retries and fallbacks,
and the ledger record, for every chat completion (and OpenAI's other APIs, whose
differences are data: `gateway.replica.endpoints.spec`).

This is plain asyncio with no Ray in it, so the same object serves the Serve ingress
(`gateway.replica.ingress`) and a plain uvicorn app in tests and benchmarks.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from decimal import Decimal
from typing import Any, TypeVar

import httpx
from fastapi import Request
from fastapi.responses import Response, StreamingResponse

from gateway.domain.config import Config, Model
from gateway.domain.endpoints import Endpoint
from gateway.domain.openai_errors import OpenAIError
from gateway.domain.pricing import PriceCatalog
from gateway.domain.routing_settings import RoutingSettings, parse_routing, routing_from_config
from gateway.domain.usage_record import RequestStatus, UsageSource
from gateway.experiments.assign import Assigner
from gateway.providers.adapter import StreamParser
from gateway.providers.anthropic_requests import estimate_messages
from gateway.providers.client import UpstreamClient, UpstreamReply
from gateway.providers.registry import adapter_for
from gateway.quality.signals import chat_signals, stream_signals
from gateway.quota.budget_cache import BudgetCache
from gateway.quota.guard import QuotaGuard, Who
from gateway.quota.syncer import PostgresQuotaStore, QuotaSyncer
from gateway.quota.worst_case import WorstCasePricer
from gateway.replica.attempts import run_attempts
from gateway.replica.auth import KeyRing
from gateway.replica.cache.gate import CacheTicket, ResponseCache
from gateway.replica.chat_request import parse_json_body
from gateway.replica.endpoints.answers import (
    answer_headers,
    error_answer,
    json_error,
    json_response,
)
from gateway.replica.endpoints.attribution import attribute
from gateway.replica.endpoints.billable import check_plan, check_priceable
from gateway.replica.endpoints.context_fit import fit_context
from gateway.replica.endpoints.experiment import assign_variant
from gateway.replica.endpoints.planning import plan_request
from gateway.replica.endpoints.spec import SPECS, serving_plan
from gateway.replica.exchange import AttemptHooks, Exchange, RecordSink, utcnow
from gateway.replica.key_scope import check_request
from gateway.replica.model_list import list_models
from gateway.replica.objects.references import created
from gateway.replica.objects.registry import ProviderObjects
from gateway.replica.record_builder import build_record
from gateway.replica.request_body import read_body
from gateway.replica.stream_relay import OpenedStream, read_first_event, relay, relay_response
from gateway.replica.usage_accounting import Accounted, account, with_failed_attempts
from gateway.routing.circuit_breaker import BreakerBoard
from gateway.routing.latency_tracker import LatencyTracker
from gateway.routing.policy import (
    RoutePlan,
    effective_prices,
)

log = logging.getLogger("costgate.gateway")
T = TypeVar("T")


class GatewayService:
    def __init__(self, cfg: Config, *, sink: RecordSink | None = None,
                 hooks: AttemptHooks | None = None,
                 transport: httpx.AsyncBaseTransport | None = None,
                 keyring: KeyRing | None = None,
                 rng: random.Random | None = None) -> None:  # fmt: skip
        self.cfg = cfg
        self.catalog = PriceCatalog.from_config(cfg)
        self.end_users = cfg.ledger.end_user_ids()  # plain, or hashed with its secret
        self.pricer = WorstCasePricer(cfg, self.catalog)
        self.prices = effective_prices(cfg)
        self.routing: RoutingSettings = routing_from_config(cfg)
        self.experiments = Assigner(self.routing.experiments)
        self.upstream = UpstreamClient(cfg, transport=transport)
        self.sink = sink or RecordSink()
        self.hooks = hooks or AttemptHooks()
        self.cache = ResponseCache(cfg, self.catalog, self.sink, self.hooks, self._headers)
        self.objects = ProviderObjects()  # the ingress gives it PostgreSQL
        self.keys = keyring or KeyRing(
            require_keys=cfg.gateway.require_keys,
            static_key_envs=cfg.gateway.static_key_envs,
        )
        self.breakers = BreakerBoard(self.routing.breaker)
        self.latency = LatencyTracker()
        # window days -> model -> (feedback score, count): swapped whole by the ingress
        self.quality: dict[int, dict[str, tuple[float, int]]] = {}
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

    def use_quota_store(self, store: PostgresQuotaStore, cache: BudgetCache | None = None
                        ) -> QuotaSyncer:
        """Budgets, key limits and model caps shared by every replica through `store`
        (`cache`: the budgets' last known set on disk); before traffic. The caller starts
        the syncer."""
        self.quota = QuotaGuard(shared=True)
        self.limits = self.quota.model_limits
        self.limits.update_caps(self.routing.caps)
        self.quota_syncer = QuotaSyncer(self.quota, store, cache=cache)
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
        self.routing, self.experiments = settings, Assigner(settings.experiments)
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
        ex.attribution = attribute(ex.endpoint, request.headers, req.body, ex.caller.tags,
                                   self.end_users)  # fmt: skip
        ex.request = req = check_request(ex.caller.scope, req, request.headers, ex.endpoint)
        await self.objects.check_request(ex.caller.app, ex.endpoint, req.body)  # before a hit
        check_priceable(ex.endpoint, req.body)  # again in _admit, against the plan
        # before routing and admission: a hit needs no upstream and spends no budget
        if (ticket := await self.cache.lookup(ex, request.headers)).response is not None:
            return ticket.response
        mix = assign_variant(self.experiments, ex, req.model, self._replicas())
        plan = self._plan(req.model, request.headers, mix)
        if plan.policy == "fixed":
            ex.experiment = None  # x-costgate-model overrode the variant: not part of it
        plan = serving_plan(plan, ex.endpoint, self.cfg, req.model)
        ex.plan = fit_context(ex, plan, self.cfg, request.headers)  # may trim ex.request
        await self._admit(ex)
        if req.stream:
            return ticket.tag(await self._open_stream(ex, ticket))
        return ticket.tag(await self._complete(ex, ticket))

    def _plan(self, requested: str, headers: Mapping[str, str],
              mix: Mapping[str, Decimal] | None = None) -> RoutePlan:  # fmt: skip
        return plan_request(self, requested, headers, mix)

    async def _admit(self, ex: Exchange, prompt: list[dict[str, Any]] | None = None) -> None:
        """Reserve the worst case on the caller's budgets, key limits and the models' token
        caps (a refusal raises). `prompt`: the input as chat messages, for an API not in
        SPECS (Anthropic's Messages)."""
        assert ex.plan is not None and ex.request is not None
        c, req = ex.caller, ex.request
        key = None if c.key_id is None else str(c.key_id)
        who = Who(c.app, c.team, key, c.rpm_limit, c.tpm_limit, ex.attribution.end_user,
                  ex.attribution.tags, c.user_rpm_limit, c.user_tpm_limit)  # fmt: skip
        # a service tier or web search must have a price on every model the route may try
        billed = check_priceable(ex.endpoint, req.body)
        check_plan(billed, self.catalog, ex.plan.models)
        ex.admission, ex.reserved_tokens = await self.quota.reserve(
            who, self.pricer, ex.plan.models,
            prompt if prompt is not None else SPECS[ex.endpoint].prompt(req.body),
            max_tokens=req.max_tokens, key_cap=c.scope.max_output_tokens,
            count_tokens=self.limits.counts_tokens(ex.plan.models), outputs=req.outputs,
            billed=billed,
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
        if ex.endpoint is Endpoint.CHAT_COMPLETIONS:
            ex.signals = chat_signals(req.body, body)
        accounted = account(
            reply.usage,
            messages=spec.prompt(req.body),
            completion=reply.text,
            model=ex.model.upstream_model if ex.model else None,
        )
        self._finish(ex, *spec.settle(RequestStatus.OK, 200, None, body.get("status")), accounted)
        await self.objects.record(ex.caller.app, created(ex.endpoint, body))
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
        await self.objects.record_opened(ex.caller.app, ex.endpoint, opened.first, opened.response)
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
            if ex.endpoint is Endpoint.CHAT_COMPLETIONS:
                ex.signals = stream_signals(req.body, getattr(parser, "finish_reason", None),
                                            parser.text())  # fmt: skip
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
        if ex.request is None:
            return None
        if ex.endpoint is Endpoint.MESSAGES:
            return estimate_messages(ex.request.body)
        return SPECS[ex.endpoint].prompt(ex.request.body)

    def _headers(self, ex: Exchange) -> dict[str, str]:
        return answer_headers(ex, self.replica_id) | self.rate_headers(ex)

    def rate_headers(self, ex: Exchange) -> dict[str, str]:
        """The key's `x-ratelimit-*`, on every answer to a key with limits."""
        c = ex.caller
        return self.quota.key_rate_headers(None if c.key_id is None else str(c.key_id),
                                           c.rpm_limit, c.tpm_limit)  # fmt: skip

    def _error_response(self, ex: Exchange, err: OpenAIError) -> Response:
        return error_answer(ex, err, self.rate_headers(ex))

    def _finish_error(self, ex: Exchange, err: OpenAIError) -> None:
        status = RequestStatus.CLIENT_ERROR if err.status < 500 else RequestStatus.UPSTREAM_ERROR
        if err.status == 429 and ex.attempts:
            status = RequestStatus.UPSTREAM_ERROR
        self._finish(ex, status, err.status, err.code, Accounted(None, UsageSource.MISSING))

    def _finish_cancelled(self, ex: Exchange) -> None:
        """A request cut off before its answer: the prompt counts if an upstream saw it."""
        accounted = account(None, messages=self._prompt(ex), completion="")
        self._finish(ex, RequestStatus.CANCELLED, 499, "client_disconnected", accounted)

    def _finish(self, ex: Exchange, status: RequestStatus, http_status: int,
                error_class: str | None, accounted: Accounted) -> None:  # fmt: skip
        if ex.recorded:
            return  # one record per request, whatever else happens to it
        ex.recorded = True
        # attempts that timed out or broke may be billed: their prompts are, at least
        accounted = with_failed_attempts(accounted, self._prompt(ex), ex.billed_failures,
                                         ex.model.upstream_model if ex.model else None)
        try:
            record = build_record(
                ex, self.cfg, self.catalog, status, http_status, error_class, accounted
            )
        except Exception:  # noqa: BLE001 - a ledger bug must not fail the client's request
            log.exception("could not build the usage record of %s", ex.request_id)
            if ex.admission is not None:
                ex.admission.release()
            return
        ex.costs = (record.actual_cost_usd, record.list_cost_usd)
        usage = accounted.usage
        used = 0 if usage is None else usage.prompt_tokens + usage.completion_tokens
        if ex.admission is not None:  # synchronous: this may run in a cancelled request
            ex.admission.settle(record.actual_cost_usd, used)
        if ex.model is not None:
            self.limits.settle_tokens(ex.model.name, ex.reserved_tokens, used)
        if ex.model is not None and status is RequestStatus.OK and ex.upstream_ms is not None:
            # the upstream's own time (not our retries and waits) ranks it for `high`/`normal`
            ttft = None if record.ttft_ms is None else record.ttft_ms / 1000
            self.latency.observe(ex.model.name, ex.upstream_ms / 1000, ttft)
        self.sink(record)

    async def aclose(self) -> None:
        self.keys.stop()
        if self.quota_syncer is not None:
            await self.quota_syncer.stop()
        await self.upstream.aclose()
        await self.cache.aclose()

