"""The demo's quality side: one running experiment on `auto` from the start, and users who
rate a share of the answers they got through `POST /v1/feedback`.

The experiment: `auto`'s configured mix (control) against DeepSeek alone, half the end
users each, sticky by user, started through the audited live-routing path. The ratings:
every few seconds the demo reads the live traffic's new rows (not the seeded history) and
rates `RATED_SHARE` of them with the answering app's key, thumbs up with the chance the
sim's `quality` gives that model (`sim.models.<id>.quality`, default 0.8): DeepSeek's is
lower in the example config, so the results page shows a real difference.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
import threading
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import httpx

from gateway.domain.config import Config
from gateway.experiments.spec import Experiment

log = logging.getLogger("costgate.demo")
DEMO_EXPERIMENT = "demo-cheap-auto"
CHEAP_VARIANT = {"deepseek-v3.2": Decimal(1)}
RATED_SHARE = 0.3
RATE_EVERY_S = 5.0


def start_demo_experiment(cfg: Config, database_url: str) -> str:
    """Start the demo's experiment (unless it runs already); a line saying what happened."""
    from gateway.control.routing_update import apply_routing_settings
    from gateway.domain.environment import environment

    env = environment()
    exp = demo_experiment(cfg)
    if exp is None:
        return "no alias `auto` in the config: no demo experiment"

    def change(cur: Any, static: Config) -> Any:
        running = {n: e for n, e in cur.experiments.items() if n != DEMO_EXPERIMENT}
        return cur.model_copy(update={"experiments": {**running, DEMO_EXPERIMENT: exp}})

    try:
        apply_routing_settings(env.ray_dashboard_url(cfg), cfg.gateway.app_name, change,
                               actor="demo", note="the demo's experiment",
                               database_url=database_url, audit_alias="auto", cfg=cfg)  # fmt: skip
    except Exception as err:  # noqa: BLE001 - the demo runs on without its experiment
        return f"the demo experiment did not start: {err}"
    return (f"experiment {DEMO_EXPERIMENT} running on auto (its mix against deepseek-v3.2 "
            f"alone, by end user): costgate experiments show {DEMO_EXPERIMENT}")  # fmt: skip


def demo_experiment(cfg: Config) -> Experiment | None:
    """`auto`'s configured mix (control) against DeepSeek alone, half the users each."""
    alias = cfg.aliases.get("auto")
    if alias is None:
        return None
    variants = {"mix": dict(alias.candidates), "cheap": CHEAP_VARIANT}
    return Experiment(alias="auto", variants=variants, split={"mix": 50, "cheap": 50},
                      stick="user", started_at=dt.datetime.now(dt.UTC))  # fmt: skip


def model_quality(cfg: Config) -> dict[str, float]:
    """Public model name -> the sim's chance its answer is rated up."""
    from gateway.devtools.sim.settings import parse_sim_settings

    settings = parse_sim_settings(cfg.sim)
    return {m.name: settings.behaviour(m.upstream_model).quality for m in cfg.models}


class DemoRaters(threading.Thread):
    """Rates a share of the live traffic's answers until `stop` is set."""

    def __init__(self, cfg: Config, database_url: str, base_url: str,
                 keys_by_app: Mapping[str, str], stop: threading.Event) -> None:  # fmt: skip
        super().__init__(name="demo-raters", daemon=True)
        self._quality = model_quality(cfg)
        self._url, self._base, self._keys, self._stop = database_url, base_url, keys_by_app, stop
        self._since = dt.datetime.now(dt.UTC)
        self._rng = random.Random(28)

    def run(self) -> None:
        from db.engine import make_engine

        engine = make_engine(self._url, pool_size=1, max_overflow=0)
        try:
            with httpx.Client(base_url=self._base, timeout=10) as client:
                while not self._stop.wait(RATE_EVERY_S):
                    try:
                        self._rate_new(engine, client)
                    except Exception as err:  # noqa: BLE001 - a demo keeps going
                        log.debug("demo ratings skipped: %r", err)
        finally:
            engine.dispose()

    def _rate_new(self, engine: Any, client: httpx.Client) -> None:
        from sqlalchemy import text

        with engine.connect() as conn:
            rows = conn.execute(text(
                "SELECT request_id, app, model, started_at FROM usage_records "
                "WHERE started_at > :since AND status = 'ok' AND model IS NOT NULL "
                "ORDER BY started_at LIMIT 2000"), {"since": self._since}).all()  # fmt: skip
        for rid, app, model, started_at in rows:
            self._since = max(self._since, started_at)
            key = self._keys.get(app)
            if key is None or self._rng.random() >= RATED_SHARE:
                continue
            thumbs = "up" if self._rng.random() < self._quality.get(model, 0.8) else "down"
            client.post("/v1/feedback", headers={"authorization": f"Bearer {key}"},
                        json={"request_id": str(rid), "thumbs": thumbs})  # fmt: skip
