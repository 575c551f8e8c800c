"""The demo's quality side: its experiment is one the live settings accept, and its users
rate a share of the live answers through `POST /v1/feedback` (a real gateway app under
uvicorn, a real ledger), thumbs up as often as the sim's quality for the model says."""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import uvicorn
from sqlalchemy import Engine, text

from db.keys import create_key, load_active_keys
from gateway.devtools import demo_quality
from gateway.devtools.demo_quality import DemoRaters, demo_experiment, model_quality
from gateway.domain.config import default_config_path, load_config
from gateway.domain.routing_settings import parse_routing, routing_from_config
from gateway.replica.auth import Caller, KeyRing
from gateway.replica.feedback.route import FeedbackApi
from gateway.replica.http_api import serve_app
from gateway.replica.service import GatewayService
from tests.fixtures.ledger_writes import write_records
from tests.fixtures.ports import PortBlock
from tests.gateway.ledger.support import make_record

FEEDBACK_PORT = 51  # an offset in the session's port block (the plain gateway has 50)


def test_the_demo_experiment_is_valid_and_its_cheap_variant_is_rated_lower() -> None:
    cfg = load_config(default_config_path())
    exp = demo_experiment(cfg)
    assert exp is not None and exp.control == "mix"
    data = routing_from_config(cfg).model_dump(mode="json")
    settings = parse_routing({"routing": {**data, "experiments": {
        "demo": exp.model_dump(mode="json")}}}, cfg)  # fmt: skip
    assert settings.experiments["demo"].variants["cheap"] == demo_quality.CHEAP_VARIANT
    quality = model_quality(cfg)
    others = [quality[m] for m in exp.variants["mix"] if m != "deepseek-v3.2"]
    assert quality["deepseek-v3.2"] < min(others)


@pytest.fixture
def feedback_server(database_url: str, port_block: PortBlock, clean_ledger: None
                    ) -> Iterator[tuple[str, dict[str, str]]]:  # fmt: skip
    keys = {app: create_key(database_url, app)[0] for app in ("web-chat", "support-bot")}
    ring = KeyRing(require_keys=True)
    ring.replace({d: Caller.of_key(k) for d, k in load_active_keys(database_url).items()})
    api = FeedbackApi(ring, database_url)
    app = serve_app(GatewayService(load_config(default_config_path()), keyring=ring),
                    feedback_api=api)  # fmt: skip
    port = port_block.port(FEEDBACK_PORT)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}", keys
    server.should_exit = True
    thread.join(10)
    api.close()


def test_the_demo_users_rate_a_share_of_the_live_answers(
    feedback_server: Any, database_url: str, ledger_engine: Engine
) -> None:
    base_url, keys = feedback_server
    cfg = load_config(default_config_path())
    now = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1)
    rows = [make_record(started_at=now, ended_at=now, app=("web-chat", "support-bot")[i % 2],
                        model=("deepseek-v3.2", "claude-sonnet-4.5")[i // 2 % 2])
            for i in range(1000)]  # fmt: skip

    write_records(database_url, rows)
    raters = DemoRaters(cfg, database_url, base_url, keys, threading.Event())
    from db.engine import make_engine

    engine = make_engine(database_url)
    try:
        with httpx.Client(base_url=base_url, timeout=10) as client:
            raters._rate_new(engine, client)
    finally:
        engine.dispose()
    with ledger_engine.connect() as conn:
        got = {m: (float(s), int(n)) for m, s, n in conn.execute(text(
            "SELECT model, avg(score), count(*) FROM feedback GROUP BY model")).all()}  # fmt: skip
    rated = sum(n for _, n in got.values())
    assert 200 < rated < 400  # about RATED_SHARE of 1,000
    assert got["deepseek-v3.2"][0] < got["claude-sonnet-4.5"][0]
