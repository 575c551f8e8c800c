"""Where the dashboard finds the ledger, the config and the running Serve app.

All from the environment, read once per process: `DATABASE_URL` (else the embedded
PostgreSQL), `DATABASE_READ_URL` (optional: a streaming replica the pages read from),
`COSTGATE_CONFIG` (else the example config), `COSTGATE_RAY_DASHBOARD_URL` and
`COSTGATE_APP_NAME` and `COSTGATE_GATEWAY_URL` (else derived from the config),
`COSTGATE_DASHBOARD_REFRESH_S`.
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache

from gateway.domain.config import Config, load_config
from gateway.domain.environment import environment


@dataclasses.dataclass(frozen=True)
class DashboardSettings:
    database_url: str  # the primary: budgets, invoices, routing (what a page writes)
    config: Config
    ray_dashboard_url: str
    app_name: str
    gateway_url: str  # lets a routing change wait until every replica reports it
    refresh_s: int
    # what pages read the ledger from: DATABASE_READ_URL (a streaming replica) if set
    read_url: str = ""

    @property
    def reads_replica(self) -> bool:
        return bool(self.read_url) and self.read_url != self.database_url


@lru_cache(maxsize=1)
def load_settings() -> DashboardSettings:
    from db.engine import database_url, read_database_url

    env = environment()
    cfg = load_config(env.config_file)
    return DashboardSettings(
        database_url=database_url(),
        config=cfg,
        ray_dashboard_url=env.ray_dashboard_url(cfg),
        app_name=env.app_name or cfg.gateway.app_name,
        gateway_url=env.gateway_url(cfg),
        refresh_s=env.dashboard_refresh_s,
        read_url=read_database_url(),
    )
