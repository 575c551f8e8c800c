"""A tiny Serve app shaped like the gateway's ingress, for testing the update path.

Like `gateway.replica.ingress`, it takes its routing settings as `user_config` and swaps them in
`reconfigure()`, and `GET /costgate/routing` answers as the gateway's does: this
replica's PID and the routing settings it runs. It starts in a second, where the real
gateway needs a sim, a database and its config.
"""

from __future__ import annotations

import os
from typing import Any

from fastapi import FastAPI
from ray import serve

api = FastAPI()


@serve.deployment
@serve.ingress(api)
class ProbeIngress:
    def __init__(self) -> None:
        self._routing: dict[str, Any] = {}

    def reconfigure(self, user_config: dict[str, Any]) -> None:
        self._routing = dict(user_config.get("routing") or {})

    @api.get("/costgate/routing")
    def routing(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "routing": self._routing}


app = ProbeIngress.bind()
