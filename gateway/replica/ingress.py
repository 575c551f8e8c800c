"""The Ray Serve ingress: one deployment whose replicas each run a `GatewayService`.

Deployed declaratively (see `gateway.control.serve_config`), with the routing settings in the
deployment's `user_config`, so that a change of weights reconfigures the running
replicas in place instead of restarting them.

`import_path: gateway.replica.ingress:build` names the application builder below.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ray import serve

from gateway.concurrency.waits import within
from gateway.domain.environment import environment

if TYPE_CHECKING:
    from gateway.replica.http_api import FastRoutes

# The request path (FastAPI, SQLAlchemy, the providers, the tokenizer...) is imported in
# the replica's constructor, not here: Serve imports this module in a worker of its own
# only to build the application (`build` below), and that import is on the path of every
# `costgate up` and redeploy (`python -X importtime`: 3.1 s with everything here, 1.3 s now).

log = logging.getLogger("costgate.ingress")
KEYS_FIRST_LOAD_TIMEOUT_S = 20.0

# the longest the ledger's last flush may take at shutdown; rows it cannot write in time
# are spooled, and the next replica replays them
LEDGER_CLOSE_TIMEOUT_S = 10.0
# how often a replica without a shared quota store asks the controller how many run
LIVE_COUNT_EVERY_S = 10.0


@serve.deployment(name="Gateway")
@serve.ingress()
class Gateway:
    # Serve awaits an async constructor; mypy knows only synchronous ones
    async def __init__(  # type: ignore[misc]
        self,
        config_path: str,
        database_url: str | None,
        state_dir: str,
        read_url: str | None = None,
    ) -> None:
        from prometheus_client import CONTENT_TYPE_LATEST

        from gateway.domain.config import load_config
        from gateway.domain.openai_errors import OpenAIError
        from gateway.ledger.writer import RecordWriter
        from gateway.metrics import serve_logs
        from gateway.metrics.replica import ReplicaMetrics, render_metrics, replica_ledgers
        from gateway.replica import serve_headers
        from gateway.replica.exchange import MetricsHooks, RecordSink
        from gateway.replica.http_api import serve_app
        from gateway.replica.service import GatewayService

        serve_headers.install()
        serve_logs.install()

        cfg = load_config(config_path)
        context = serve.get_replica_context()
        replica_id = context.replica_tag if context else f"pid-{os.getpid()}"
        app_name = cfg.gateway.app_name
        self.metrics = ReplicaMetrics(replica_id, app_name)
        self.writer: Any = None
        if database_url and cfg.gateway.record_usage:
            # one folder for every replica: a replacement replica (a new tag) adopts and
            # replays what its predecessor spooled; files are claimed by atomic rename
            spool = Path(state_dir) / "spool"
            self.writer = RecordWriter(database_url, spool_dir=spool)
            await self.writer.start()

        def observe(record: Any) -> None:
            self.metrics.observe_request(record)

        sink = RecordSink(submit=self.writer.submit if self.writer else None, observe=observe)
        self.service = GatewayService(cfg, sink=sink, hooks=MetricsHooks(self.metrics))
        self.service.replica_id = replica_id
        if database_url and not cfg.cache.redis_url:
            # without Redis, every replica and node shares the ledger database's table
            from gateway.replica.cache.backends import MemoryLRU
            from gateway.replica.cache.postgres_store import PostgresStore, TieredStore

            o = cfg.cache
            shared = PostgresStore(database_url, o.redis_timeout_s)
            shared.listen()  # its key index loads now, not on the first opted-in request
            self.service.cache.backend = TieredStore(MemoryLRU(o.max_bytes), shared)
        if self.writer is not None:
            writer = self.writer
            self.service.readiness = lambda: writer.health().reasons
        # the ledger's flush on the way out: what the drain of streams leaves of Serve's
        # graceful shutdown timeout is unknown here, so never more than half of it
        graceful_s = cfg.gateway.graceful_shutdown_timeout_s
        self._ledger_close_s = min(LEDGER_CLOSE_TIMEOUT_S, graceful_s / 2)
        self._ledger_stranded_s = min(cfg.gateway.ledger_stranded_wait_s, graceful_s / 2)
        self.quota_syncer: Any = None
        if database_url:
            self._start_key_refresh(database_url, state_dir)
            self._quality_task = asyncio.get_running_loop().create_task(
                self._refresh_quality(database_url))  # fmt: skip
            # FX rates and budgets load side by side, while the keys load (each its own
            # connection): the replica's start waits for the slowest, not their sum
            await asyncio.gather(self._start_fx_refresh(database_url, cfg.ledger.fx_refresh_s),
                                 self._start_quota(database_url, replica_id, state_dir))
            self._use_object_store(database_url)
            # Serve sends traffic once __init__ returns: a replica that answered before
            # its first key set arrived would refuse valid keys (seen during redeploys)
            if not await self.service.keys.wait_loaded(KEYS_FIRST_LOAD_TIMEOUT_S):
                log.warning("gateway keys not loaded at start; serving with static keys")
        self.metrics.set_routing_weights(self.service.routing.aliases)
        await self.metrics.start()
        self._stats_task = asyncio.get_running_loop().create_task(self._copy_writer_stats())

        async def render() -> tuple[bytes, str]:
            try:
                return await render_metrics(app_name), CONTENT_TYPE_LATEST
            except Exception as err:  # noqa: BLE001 - the hub is away: say so, briefly
                raise OpenAIError(
                    503, f"metrics hub unavailable ({type(err).__name__})", code="metrics"
                ) from None

        from gateway.replica.feedback.route import FeedbackApi
        from gateway.replica.usage_api.route import UsageApi

        # reads of the ledger may go to a streaming replica (DATABASE_READ_URL)
        self.usage_api = UsageApi(self.service.keys, database_url, read_url)
        self.feedback_api = FeedbackApi(self.service.keys, database_url)
        self.batch_api: Any = None
        if database_url:
            self._start_batches(database_url, state_dir, replica_id)
        self._app = serve_app(
            self.service, render_metrics=render, replica_ledgers=lambda: replica_ledgers(app_name),
            usage_api=self.usage_api, feedback_api=self.feedback_api, batch_api=self.batch_api,
        )
        from gateway.domain.token_estimate import warm_up

        # the tokenizer's vocabulary (only estimates use it) loads after the replica is up
        self._warm_up = asyncio.get_running_loop().run_in_executor(None, warm_up)
        self._count_task: asyncio.Task[None] | None = None
        if self.quota_syncer is None and context is not None:
            # caps split per replica: by the replicas that run now, as the controller
            # counts them (autoscaling moves it), never by the configured minimum
            self._count_task = asyncio.get_running_loop().create_task(
                self._follow_replica_count(app_name, context.deployment)
            )

    def __serve_build_asgi_app__(self) -> FastRoutes:
        # Serve calls this right after __init__: the app's routes close over this
        # replica's service, which a module-level app could not do
        return self._app

    async def _follow_replica_count(self, app_name: str, deployment: str) -> None:
        while True:  # cancelled at shutdown; a controller call every 10 s, never per request
            try:
                status = await asyncio.to_thread(serve.status)
                states = status.applications[app_name].deployments[deployment].replica_states
                running = sum(n for state, n in states.items() if state == "RUNNING")
                self.service.set_live_replicas(running)
            except Exception as err:  # noqa: BLE001 - keep the last count; try again
                log.debug("live replica count unavailable: %r", err)
            await asyncio.sleep(LIVE_COUNT_EVERY_S)

    async def _refresh_quality(self, database_url: str) -> None:
        """Feedback per model for `policy: quality` (docs/QUALITY.md), as prices are."""
        from db.engine import make_engine
        from db.quality.model_quality import QUALITY_REFRESH_S, model_quality
        from gateway.routing.policy import window_days

        engine = make_engine(database_url, pool_size=1, max_overflow=0)
        windows = {window_days(a.quality_window) for a in self.service.cfg.aliases.values()}
        try:
            while True:  # cancelled at shutdown; the last scores stay while PostgreSQL is away
                try:
                    self.service.quality = await asyncio.to_thread(model_quality, engine, windows)
                except Exception as err:  # noqa: BLE001 - keep the last scores; try again
                    log.debug("model quality unavailable: %r", err)
                await asyncio.sleep(QUALITY_REFRESH_S)
        finally:
            engine.dispose()

    async def _copy_writer_stats(self) -> None:
        while True:  # cancelled at shutdown
            if self.writer is not None:
                alive = int(self.writer.health().alive)
                self.metrics.set_writer_stats({**self.writer.stats(), "alive": alive})
            self.metrics.set_cache_stats(self.service.cache.stats())
            await asyncio.sleep(1.0)

    def _start_key_refresh(self, database_url: str, state_dir: str) -> None:
        from db.engine import make_engine
        from db.key_cache import KEY_CACHE_FILE, KeyCache
        from db.keys import load_active_key, load_active_keys
        from gateway.replica.auth import REFRESH_S, Caller

        # two: the periodic refresh and the lookup of a key not seen yet may overlap, and
        # one would wait for the other's connection past MISS_LOOKUP_WAIT_S
        engine = make_engine(database_url, pool_size=2, max_overflow=0)
        cache = KeyCache(Path(state_dir) / KEY_CACHE_FILE)
        loaded_at: float | None = None  # Unix time of this replica's last load

        def load() -> dict[str, Caller]:
            nonlocal loaded_at
            try:
                started = time.time()
                keys = load_active_keys(engine)
            except Exception:
                # PostgreSQL away: the set another replica here loaded later than we did,
                # if any (at start: any set), so that neither a redeploy during an outage
                # nor a key created just before it locks its app out
                cached = cache.load(newer_than=loaded_at)
                if cached is None:
                    raise
                log.warning("gateway keys from the local cache: PostgreSQL unreachable")
                keys = cached
            else:
                cache.save(keys)
            loaded_at = started
            return {digest: Caller.of_key(key) for digest, key in keys.items()}

        def load_one(digest: str) -> Caller | None:
            info = load_active_key(engine, digest)
            return None if info is None else Caller.of_key(info)

        self.service.keys.start_refresh(load, every_s=REFRESH_S, load_one=load_one)

    def _use_object_store(self, database_url: str) -> None:
        """Provider objects' owners in PostgreSQL (`gateway.replica.objects`)."""
        from db.engine import make_engine
        from db.shared_state.provider_objects import PostgresObjectStore
        from gateway.replica.objects.registry import ProviderObjects

        engine = make_engine(database_url, pool_size=1, max_overflow=2)
        self.service.objects = ProviderObjects(PostgresObjectStore(engine))

    def _start_batches(self, database_url: str, state_dir: str, replica_id: str) -> None:
        """The batch APIs and the poll loop (docs/BATCHES.md): every replica runs it, the
        one holding the poll lease asks the providers."""
        from gateway.batches.api import BatchApi
        from gateway.batches.poller import BatchPoller
        from gateway.domain.endpoints import Endpoint
        from gateway.replica.endpoints.planning import plan_request
        from gateway.replica.endpoints.spec import serving_plan

        svc, opts = self.service, self.service.cfg.batches

        def plan(requested: str) -> tuple[str, ...]:
            return serving_plan(plan_request(svc, requested, {}), Endpoint.CHAT_COMPLETIONS,
                                svc.cfg, requested).models  # fmt: skip

        files = Path(opts.files_dir) if opts.files_dir else Path(state_dir) / "files"
        self.batch_api = BatchApi(svc, plan, database_url, files)
        poller = BatchPoller(self.batch_api, f"{replica_id}:{os.getpid()}", opts.poll_s,
                             observe=self.metrics.observe_request)
        self._batch_task = asyncio.get_running_loop().create_task(poller.run())

    async def _start_fx_refresh(self, database_url: str, every_s: float) -> None:
        """Dated FX rates (docs/FINANCE.md): loaded now and every `every_s` (a minute by
        default, ledger.fx_refresh_s), never per request."""
        from db.analytics.fx_store import load_schedule
        from db.engine import make_engine
        from gateway.finance.fx_refresh import FxRefresher

        engine = make_engine(database_url, pool_size=1, max_overflow=0)
        self.fx = FxRefresher(self.service, lambda: load_schedule(engine), every_s=every_s)
        try:
            await within(self.fx.refresh(), KEYS_FIRST_LOAD_TIMEOUT_S)
        except TimeoutError:
            log.warning("FX rates not loaded at start; pricing at the config's rates")
        self.fx.start()

    async def _start_quota(self, database_url: str, replica_id: str, state_dir: str) -> None:
        """Budgets, key limits and model caps shared across replicas (docs/BUDGETS.md)."""
        import secrets

        from db.engine import make_engine
        from gateway.quota.budget_cache import BUDGET_CACHE_FILE, BudgetCache
        from gateway.quota.syncer import PostgresQuotaStore

        engine = make_engine(database_url, pool_size=1, max_overflow=1)
        # unique per process: a restarted replica with the same tag must not inherit
        # (and double count) its predecessor's holds; those lapse instead
        holder = f"{replica_id}:{os.getpid()}:{secrets.token_hex(4)}"
        cache = BudgetCache(Path(state_dir) / BUDGET_CACHE_FILE)
        self.quota_syncer = self.service.use_quota_store(PostgresQuotaStore(engine, holder),
                                                         cache)  # fmt: skip
        try:
            await within(self.quota_syncer.load_budgets(), KEYS_FIRST_LOAD_TIMEOUT_S)
        except Exception as err:  # noqa: BLE001 - the syncer keeps trying in the background
            log.warning("budgets not loaded at start: %s", type(err).__name__)
        self.quota_syncer.start()

    async def reconfigure(self, user_config: dict[str, Any]) -> None:
        # parse_routing raises on bad settings; writers validate before they submit, so
        # reaching this with bad settings means someone bypassed them
        settings = self.service.apply_user_config(user_config)
        self.metrics.set_routing_weights(settings.aliases)
        log.info("routing settings version %s applied", settings.version)

    async def check_health(self) -> None:
        # Never fail for a PostgreSQL outage, nor for a spool that cannot be written (the
        # next replica gets the same disk): a failing check replaces the replica, which
        # would only restart replicas in a loop. A dead writer is what a new process cures
        # (it adopts the spool); a live one restarts its own loops.
        if not self.service.ready:
            raise RuntimeError("gateway service not ready")
        if self.writer is not None:
            health = self.writer.health()
            if not health.alive:
                raise RuntimeError("; ".join(health.problems))

    async def __del__(self) -> None:
        # graceful shutdown (downscale, redeploy, `serve shutdown`), after Serve drained
        # the requests in flight. The ledger first: its rows are the one thing here that
        # cannot be recomputed, and a metrics hub that is away must not eat its time.
        # getattr: a constructor that failed half-way leaves some parts unset
        writer = getattr(self, "writer", None)
        if writer is not None:
            close_s = getattr(self, "_ledger_close_s", LEDGER_CLOSE_TIMEOUT_S)
            stranded_s = getattr(self, "_ledger_stranded_s", 0.0)
            await _shutdown_step(
                "ledger writer", writer.close(timeout_s=close_s, stranded_s=stranded_s)
            )
        for name in ("_stats_task", "_count_task", "_quality_task", "_batch_task"):
            task = getattr(self, name, None)
            if task is not None:
                task.cancel()
        fx = getattr(self, "fx", None)
        if fx is not None:
            fx.stop()
        metrics = getattr(self, "metrics", None)
        if metrics is not None:
            if writer is not None:
                metrics.set_writer_stats(writer.stats())  # the final figures, pushed below
            await _shutdown_step("metrics", metrics.close())
        service = getattr(self, "service", None)
        if service is not None:
            await _shutdown_step("service", service.aclose())
        for api in (getattr(self, "usage_api", None), getattr(self, "feedback_api", None)):
            if api is not None:
                api.close()
        batches = getattr(self, "batch_api", None)
        if batches is not None:
            await _shutdown_step("batches", batches.aclose())


async def _shutdown_step(what: str, step: Awaitable[None]) -> None:
    """One part's shutdown; its failure is logged and never skips the next part's."""
    try:
        await step
    except Exception:  # noqa: BLE001 - shutting down; nothing left to tell
        log.exception("error while shutting down the %s", what)


def build(args: dict[str, Any]) -> Any:
    """Serve application builder: `args` come from the generated declarative config.

    The database URLs come from the environment Ray was started with (DATABASE_URL, and
    DATABASE_READ_URL for the usage API's reads if set), not
    from `args`: the declarative config is readable by anyone who can reach Ray's
    dashboard, and a URL may hold a password.
    """
    # mypy sees the class as written, not the Deployment that serve.deployment made of it
    deployment: Any = Gateway
    return deployment.bind(
        args["config_path"],
        environment().database_url_value,
        args.get("state_dir", ".state"),
        environment().database_read_url_value,
    )
