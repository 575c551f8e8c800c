"""Who owns each provider object: a replica's memory in front of PostgreSQL.

An id this replica recorded or looked up is answered from memory (a conversation's next
turn names the response its last turn created, usually here); any other is one query
for all of a request's ids. A request that names an id its app did not create through
the gateway gets a 404, the answer the provider gives for an id that does not exist, so
another app's ids cannot be told from made-up ones. Never open on doubt: with PostgreSQL
away an id not in memory is a 503, and an id that could not be written stays in this
replica's memory (its app's next turn on another replica is then refused, not served).
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Protocol

import httpx

from gateway.concurrency.waits import within
from gateway.domain.endpoints import Endpoint
from gateway.domain.openai_errors import OpenAIError
from gateway.replica.objects.references import (
    BadReference,
    ObjectRef,
    created_in_event,
    referenced,
)

log = logging.getLogger("costgate.objects")
MEMORY_IDS = 200_000  # about 30 MB at most: ids are short strings
STORE_TIMEOUT_S = 5.0


class ObjectStore(Protocol):
    def record(self, app: str, refs: Sequence[ObjectRef]) -> None: ...

    def owners(self, ids: Sequence[str]) -> dict[str, str]: ...


class ProviderObjects:
    def __init__(self, store: ObjectStore | None = None) -> None:
        # without a store (no database: a plain server, a test) memory is the whole truth
        self.store = store
        self._owner: OrderedDict[str, str] = OrderedDict()

    def _remember(self, object_id: str, app: str) -> None:
        self._owner[object_id] = app
        self._owner.move_to_end(object_id)
        while len(self._owner) > MEMORY_IDS:
            self._owner.popitem(last=False)

    async def check_request(self, app: str, endpoint: Endpoint, body: dict[str, Any]) -> None:
        """A request's object ids, each created by `app` (else a 404; malformed: a 400)."""
        try:
            refs = referenced(endpoint, body)
        except BadReference as err:
            raise OpenAIError(400, str(err), param=err.param, code="invalid_value") from None
        await self.check(app, refs)

    async def check(self, app: str, refs: Sequence[ObjectRef]) -> None:
        """Raise a 404 for the first id that `app` did not create (a 503 if unknown)."""
        if not refs:
            return
        missing = [r.object_id for r in refs if r.object_id not in self._owner]
        if missing and self.store is not None:
            try:
                found = await within(
                    asyncio.to_thread(self.store.owners, missing), STORE_TIMEOUT_S
                )
            except Exception as err:  # noqa: BLE001 - unknown owner: refuse, never serve
                log.warning("provider object owners not read: %s", type(err).__name__)
                raise OpenAIError(
                    503, "The gateway cannot check this request's object ids; retry shortly.",
                    code="objects_unavailable", headers={"retry-after": "2"},
                ) from None  # fmt: skip
            for object_id, owner in found.items():
                self._remember(object_id, owner)
        for ref in refs:
            if self._owner.get(ref.object_id) != app:
                raise OpenAIError(
                    404,
                    f"No {ref.kind.replace('_', ' ')} found with id {ref.object_id[:80]!r}.",
                    param=ref.param,
                    code="not_found",
                )

    async def record(self, app: str, refs: Sequence[ObjectRef]) -> None:
        """Bind what an answer created to `app`, durably before the answer leaves (its
        id may come straight back, to another replica)."""
        if not refs:
            return
        for ref in refs:
            self._remember(ref.object_id, app)
        if self.store is None:
            return
        try:
            await within(asyncio.to_thread(self.store.record, app, refs), STORE_TIMEOUT_S)
        except Exception as err:  # noqa: BLE001 - kept in memory: refused elsewhere, not open
            log.warning("provider objects of app %s not stored (%s): only this replica "
                        "knows them", app, type(err).__name__)  # fmt: skip

    async def record_opened(self, app: str, endpoint: Endpoint, first: Sequence[Any],
                            response: httpx.Response) -> None:  # fmt: skip
        """Bind what a stream's first events say it created before a byte reaches the
        client (a `response.created` carries the id the next turn names)."""
        made = [ref for event in first for ref in created_in_event(endpoint, event)]
        try:
            await self.record(app, made)
        except BaseException:  # cancelled here: the upstream stream is closed, not leaked
            asyncio.get_running_loop().create_task(response.aclose())
            raise
