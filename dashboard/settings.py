"""Where the dashboard finds the ledger, the config and the running Serve app.

All from the environment, read once per process: `DATABASE_URL` (else the embedded
PostgreSQL), `COSTGATE_CONFIG` (else the example config), `COSTGATE_RAY_DASHBOARD_URL`
and `COSTGATE_APP_NAME` and `COSTGATE_GATEWAY_URL` (else derived from the config),
`COSTGATE_DASHBOARD_REFRESH_S`.
"""

from __future__ import annotations

import dataclasses
import os
from functools import lru_cache

from gateway.domain.config import Config, default_config_path, load_config

RAY_DASHBOARD_URL_ENV = "COSTGATE_RAY_DASHBOARD_URL"
APP_NAME_ENV = "COSTGATE_APP_NAME"
GATEWAY_URL_ENV = "COSTGATE_GATEWAY_URL"
REFRESH_ENV = "COSTGATE_DASHBOARD_REFRESH_S"


@dataclasses.dataclass(frozen=True)
class DashboardSettings:
    database_url: str
    config: Config
    ray_dashboard_url: str
    app_name: str
    gateway_url: str  # lets a routing change wait until every replica reports it
    refresh_s: int


@lru_cache(maxsize=1)
def load_settings() -> DashboardSettings:
    from db.engine import database_url

    cfg = load_config(default_config_path())
    ray_url = os.environ.get(RAY_DASHBOARD_URL_ENV) or (
        f"http://127.0.0.1:{cfg.gateway.ray.dashboard_port}"
    )
    return DashboardSettings(
        database_url=database_url(),
        config=cfg,
        ray_dashboard_url=ray_url.rstrip("/"),
        app_name=os.environ.get(APP_NAME_ENV) or cfg.gateway.app_name,
        gateway_url=(
            os.environ.get(GATEWAY_URL_ENV) or f"http://{cfg.gateway.host}:{cfg.gateway.port}"
        ).rstrip("/"),
        refresh_s=int(os.environ.get(REFRESH_ENV, "30")),
    )
