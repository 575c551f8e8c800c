"""The usage and costs API as an admin key holder calls it: the gateway's own FastAPI app
(the routes a Serve replica runs) in process, over the test ledger."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import httpx

from db.keys import create_key, load_active_keys
from gateway.domain.config import default_config_path, load_config
from gateway.replica.auth import Caller, KeyRing
from gateway.replica.http_api import build_app
from gateway.replica.service import GatewayService
from gateway.replica.usage_api.route import UsageApi


@contextlib.contextmanager
def admin_client(
    database_url: str, read_url: str | None = None
) -> Iterator[Callable[..., httpx.Response]]:
    """`get(path, **params)` for `/v1/organization/<path>`, with a new admin key
    (`read_url`: the usage API reads a streaming replica there, as DATABASE_READ_URL)."""
    key, _ = create_key(database_url, "ops", is_admin=True)
    ring = KeyRing(require_keys=True)
    ring.replace({d: Caller.of_key(k) for d, k in load_active_keys(database_url).items()})
    usage = UsageApi(ring, database_url, read_url)
    app = build_app(GatewayService(load_config(default_config_path()), keyring=ring),
                    usage_api=usage)  # fmt: skip

    def get(path: str, **params: Any) -> httpx.Response:
        async def go() -> httpx.Response:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
                return await client.get(f"/v1/organization/{path}", params=params,
                                        headers={"authorization": f"Bearer {key}"})  # fmt: skip

        return asyncio.run(go())

    try:
        yield get
    finally:
        usage.close()
