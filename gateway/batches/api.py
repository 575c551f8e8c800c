"""One replica's side of the batch APIs: creating a batch (admission, the provider's
batch, its row), reading and cancelling one, and the budget holds this replica took for
its batches until they end."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import httpx

from db.batches import store
from db.engine import make_engine
from gateway.domain.config import Config
from gateway.domain.openai_errors import OpenAIError
from gateway.domain.pricing import PriceCatalog
from gateway.quota.guard import Admission, QuotaGuard
from gateway.quota.worst_case import WorstCasePricer

from .admission import BatchCaller, admit_batch, line_models
from .files import FileStore, not_found
from .lines import BatchLine, upstream_jsonl
from .upstream import BatchUpstream, UpstreamBatchError

log = logging.getLogger("costgate.batches")


class Parts(Protocol):
    """What of the replica's gateway a batch uses (`GatewayService` has it); read on each
    use: the catalog and the quota guard are swapped whole while the replica runs."""

    cfg: Config
    catalog: PriceCatalog
    pricer: WorstCasePricer
    quota: QuotaGuard


class BatchApi:
    def __init__(self, parts: Parts, plan: Callable[[str], tuple[str, ...]], database_url: str,
                 files_dir: Path, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.parts = parts
        self.plan = plan
        self.engine = make_engine(database_url, pool_size=2, max_overflow=2)
        self.files = FileStore(self.engine, files_dir)
        self.upstream = BatchUpstream(transport)
        self.holds: dict[str, Admission] = {}  # batch id -> its budget reservation here

    @property
    def cfg(self) -> Config:
        return self.parts.cfg

    async def create(self, api: str, caller: BatchCaller, lines: list[BatchLine], *,
                     endpoint: str, window: str = "24h", input_file_id: str | None = None,
                     metadata: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
        p = self.parts
        admitted = await admit_batch(api, caller, lines, cfg=p.cfg, plan=self.plan,
                                     pricer=p.pricer, quota=p.quota)  # fmt: skip
        try:
            if api == "openai":
                jsonl = upstream_jsonl(lines, admitted.upstream, endpoint)
                upstream_id = await self.upstream.create(admitted.provider, endpoint, window,
                                                         jsonl, None)  # fmt: skip
            else:
                requests = [{"custom_id": line.custom_id,
                             "params": {**line.body, "model": admitted.upstream[line.custom_id]}}
                            for line in lines]  # fmt: skip
                upstream_id = await self.upstream.create(admitted.provider, endpoint, window,
                                                         None, requests)  # fmt: skip
        except UpstreamBatchError as err:
            if admitted.admission is not None:
                admitted.admission.release()
            raise OpenAIError(502, f"The provider refused the batch ({err}).",
                              code="upstream_error") from None  # fmt: skip
        batch_id = ("batch_" if api == "openai" else "msgbatch_") + secrets.token_hex(12)
        row: dict[str, Any] = {
            "id": batch_id, "api": api, "app": caller.app,
            "team": caller.team, "key_id": caller.key_id, "provider": admitted.provider.name,
            "provider_batch_id": upstream_id, "endpoint": endpoint, "completion_window": window,
            "status": "in_progress", "input_file_id": input_file_id, "output_file_id": None,
            "error_file_id": None, "lines": line_models(lines, admitted), "metadata": metadata,
            "completed_lines": 0, "failed_lines": 0, "reserved_usd": admitted.reserved_usd,
            "billed_usd": None, "list_usd": None, "created_at": dt.datetime.now(dt.UTC),
            "cancelling_at": None, "ended_at": None,
        }
        try:
            await asyncio.to_thread(store.add_batch, self.engine, row)
        except Exception:
            if admitted.admission is not None:
                admitted.admission.release()
            log.exception("batch %s sent to %s but not recorded", row["id"], row["provider"])
            await self._cancel_upstream(row)
            raise OpenAIError(503, "The batch could not be recorded; it was cancelled.",
                              code="ledger_unavailable") from None  # fmt: skip
        if admitted.admission is not None:
            self.holds[batch_id] = admitted.admission
        return row

    async def find(self, api: str, app: str, batch_id: str) -> dict[str, Any]:
        row = await asyncio.to_thread(store.find_batch, self.engine, batch_id, app)
        if row is None or row["api"] != api:
            raise not_found("batch", batch_id)
        return row

    async def list(self, api: str, app: str, after: str | None, limit: int
                   ) -> list[dict[str, Any]]:  # fmt: skip
        return await asyncio.to_thread(store.list_batches, self.engine, app, api, after, limit)

    async def cancel(self, api: str, app: str, batch_id: str) -> dict[str, Any]:
        row = await self.find(api, app, batch_id)
        if row["status"] in store.OPEN_STATUSES and row["cancelling_at"] is None:
            provider = self.cfg.provider(row["provider"])
            try:
                await self.upstream.cancel(provider, row["provider_batch_id"])
            except UpstreamBatchError as err:
                raise OpenAIError(502, f"The provider refused the cancellation ({err}).",
                                  code="upstream_error") from None  # fmt: skip
            values = {"status": "cancelling", "cancelling_at": dt.datetime.now(dt.UTC)}
            await asyncio.to_thread(store.update_open_batch, self.engine, batch_id, values)
            row = await self.find(api, app, batch_id)
        return row

    async def _cancel_upstream(self, row: dict[str, Any]) -> None:
        try:
            await self.upstream.cancel(self.cfg.provider(row["provider"]),
                                       row["provider_batch_id"])  # fmt: skip
        except UpstreamBatchError:
            log.warning("batch %s: the provider's batch could not be cancelled", row["id"])

    async def settle_ended(self) -> None:
        """Settle the holds of this replica's batches that ended (on any replica), at
        what their lines billed: the ledger has their rows from now on."""
        if not self.holds:
            return
        ended = await asyncio.to_thread(store.ended_batches, self.engine, list(self.holds))
        for batch_id, billed in ended.items():
            hold = self.holds.pop(batch_id, None)
            if hold is not None:
                hold.settle(billed, None)

    async def aclose(self) -> None:
        for hold in self.holds.values():
            hold.release()  # the holds lapse with this replica's leases anyway
        self.holds.clear()
        await self.upstream.aclose()
        self.engine.dispose()
