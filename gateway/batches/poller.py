"""Moving batches forward: one replica at a time asks each open batch's provider how it
is doing and, once it ended, writes its lines' ledger rows and its result files.

Every replica runs the loop; only the one holding the `batch-poll` lease (a row in
`batch_leases`, renewed each round, lapsing after three rounds unrenewed) asks the
providers. The end of a batch is written in one transaction under the batch row's lock
(`db.batches.store.finish_batch`), and each row's request id derives from the batch and
the line: a lapsed lease, two replicas or a retried round still write each row once.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import logging
from collections.abc import Callable
from typing import Any

from db.batches import store
from gateway.domain.config import Provider
from gateway.domain.usage_record import UsageRecord

from .api import BatchApi
from .pricing import batch_factor
from .results import anthropic_outcomes, finish, ledger_values, openai_outcomes
from .upstream import UpstreamBatchError

log = logging.getLogger("costgate.batches")
LEASE = "batch-poll"


def result_file_id(batch_id: str, kind: str) -> str:
    """The same id for a batch's output (or error) file whoever writes it."""
    return "file-" + hashlib.sha256(f"{batch_id}:{kind}".encode()).hexdigest()[:24]


class BatchPoller:
    def __init__(self, api: BatchApi, holder: str, every_s: float,
                 observe: Callable[[UsageRecord], None] | None = None) -> None:  # fmt: skip
        self.api = api
        self.holder = holder
        self.every_s = every_s
        self.observe = observe  # the replica's metrics: each row counted where it was written

    async def run(self) -> None:
        while True:  # cancelled at shutdown
            try:
                await self.round()
            except Exception as err:  # noqa: BLE001 - PostgreSQL or a provider away: next round
                log.warning("batch poll round failed: %s", type(err).__name__)
            await asyncio.sleep(self.every_s)

    async def round(self) -> int:
        """One round; how many batches ended in it (0 without the lease)."""
        api = self.api
        await api.settle_ended()
        held = await asyncio.to_thread(store.take_lease, api.engine, LEASE, self.holder,
                                       self.every_s * 3)  # fmt: skip
        if not held:
            return 0
        ended = 0
        for row in await asyncio.to_thread(store.open_batches, api.engine):
            try:
                ended += await self.advance(row)
            except UpstreamBatchError as err:
                log.warning("batch %s: %s", row["id"], err)
        await api.settle_ended()
        return ended

    async def advance(self, row: dict[str, Any]) -> int:
        api = self.api
        cfg = api.cfg
        try:
            provider: Provider = cfg.provider(row["provider"])
        except KeyError:
            log.warning("batch %s: provider %s is no longer configured", row["id"],
                        row["provider"])  # fmt: skip
            return 0
        state = await api.upstream.state(provider, row["provider_batch_id"])
        if not state.ended:
            if state.status != row["status"] and state.status in store.OPEN_STATUSES:
                await asyncio.to_thread(store.update_open_batch, api.engine, row["id"],
                                        {"status": state.status})  # fmt: skip
            return 0
        if row["api"] == "anthropic":
            outcomes = anthropic_outcomes(state.results or [])
            final = "cancelled" if row["cancelling_at"] is not None else "completed"
        else:
            outcomes = openai_outcomes(state.results or [])
            final = state.status
        now = dt.datetime.now(dt.UTC)
        done = finish(row, outcomes, cfg, api.parts.catalog, batch_factor(provider), now)
        files = []
        values: dict[str, Any] = {
            "status": final, "ended_at": now, "completed_lines": done.completed,
            "failed_lines": done.failed, "billed_usd": done.billed_usd,
            "list_usd": done.list_usd,
        }
        for kind, data, column in (("output", done.output, "output_file_id"),
                                   ("errors", done.errors, "error_file_id")):  # fmt: skip
            if not data:
                continue
            file_id = result_file_id(row["id"], kind)
            # the bytes first, then (in the transaction) the row naming them
            await asyncio.to_thread(api.files.write_bytes, file_id, data)
            files.append(api.files.file_row(file_id, row["app"], "batch_output",
                                            f"{row['id']}_{kind}.jsonl", data))
            values[column] = file_id
        rows = [ledger_values(r) for r in done.records]
        ids = [{"request_id": r.request_id, "batch_id": row["id"], "custom_id": line["custom_id"]}
               for r, line in zip(done.records, row["lines"], strict=True)]  # fmt: skip
        wrote = await asyncio.to_thread(store.finish_batch, api.engine, row["id"], rows, ids,
                                        files, values)  # fmt: skip
        if wrote and self.observe is not None:
            for record in done.records:
                self.observe(record)
        if wrote:
            log.info("batch %s %s: %d lines, billed %s USD", row["id"], final,
                     len(rows), done.billed_usd)  # fmt: skip
        return int(wrote)
