"""`POST /v1/feedback` on the gateway's own FastAPI app (the routes a Serve replica runs)
in process, over a real PostgreSQL ledger: an app rates its own requests only (403),
an unknown id is a 404, the same rater's second score replaces the first and both are
kept in the audit trail, a bad body is a 400 naming its field."""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, text

from db.keys import create_key, load_active_keys
from gateway.domain.config import default_config_path, load_config
from gateway.replica.auth import Caller, KeyRing
from gateway.replica.feedback.route import FeedbackApi
from gateway.replica.http_api import serve_app
from gateway.replica.service import GatewayService
from tests.fixtures.ledger_writes import write_records
from tests.gateway.ledger.support import make_record

Post = Callable[..., httpx.Response]


@pytest.fixture
def ledger(database_url: str, ledger_engine: Engine, clean_ledger: None) -> Any:
    """Two ledger rows, one of app `search`, one of app `support`, written days ago."""
    ago = dt.datetime.now(dt.UTC) - dt.timedelta(days=9)  # late feedback counts
    rows = {app: make_record(app=app, started_at=ago, ended_at=ago + dt.timedelta(seconds=1))
            for app in ("search", "support")}  # fmt: skip

    write_records(database_url, rows.values())
    return rows


@pytest.fixture
def post(database_url: str, ledger: Any) -> Iterator[tuple[Post, dict[str, str]]]:
    keys = {app: create_key(database_url, app)[0] for app in ("search", "support")}
    ring = KeyRing(require_keys=True)
    ring.replace({d: Caller.of_key(k) for d, k in load_active_keys(database_url).items()})
    api = FeedbackApi(ring, database_url)
    app = serve_app(GatewayService(load_config(default_config_path()), keyring=ring),
                    feedback_api=api)  # fmt: skip

    def send(app_name: str, body: Any) -> httpx.Response:
        headers = {"authorization": f"Bearer {keys[app_name]}"}

        async def go() -> httpx.Response:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
                return await client.post("/v1/feedback", json=body, headers=headers)

        return asyncio.run(go())

    yield send, keys
    api.close()


def _feedback(engine: Engine) -> list[tuple[Any, ...]]:
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(text(
            "SELECT request_id, rater, app, model, score, labels, comment FROM feedback"
        )).all()]  # fmt: skip


def test_an_app_rates_its_own_request_days_later(post: Any, ledger: Any,
                                                 ledger_engine: Engine) -> None:  # fmt: skip
    send, _ = post
    rid = ledger["search"].request_id
    r = send("search", {"request_id": str(rid), "thumbs": "up", "labels": ["helpful"],
                        "comment": "right answer"})  # fmt: skip
    assert r.status_code == 200, r.text
    assert r.json()["replaced"] is False and r.json()["score"] == 1.0
    assert _feedback(ledger_engine) == [
        (rid, r.json()["rater"], "search", ledger["search"].model, Decimal("1.0000"),
         ["helpful"], "right answer"),
    ]  # fmt: skip


def test_feedback_on_another_apps_request_is_a_403_and_stores_nothing(
    post: Any, ledger: Any, ledger_engine: Engine
) -> None:
    send, _ = post
    r = send("search", {"request_id": str(ledger["support"].request_id), "score": 0.2})
    assert r.status_code == 403, r.text
    assert r.json()["error"]["code"] == "not_your_request"
    assert _feedback(ledger_engine) == []


def test_feedback_on_an_unknown_request_is_a_404(post: Any, ledger_engine: Engine) -> None:
    send, _ = post
    r = send("search", {"request_id": str(uuid.uuid4()), "score": 0.5})
    assert r.status_code == 404, r.text
    assert r.json()["error"]["param"] == "request_id"
    assert _feedback(ledger_engine) == []


def test_a_second_score_from_the_same_rater_replaces_the_first_and_both_are_kept(
    post: Any, ledger: Any, ledger_engine: Engine
) -> None:
    send, _ = post
    rid = str(ledger["support"].request_id)
    assert send("support", {"request_id": rid, "score": 0.9, "rater": "u-1"}).status_code == 200
    again = send("support", {"request_id": rid, "thumbs": "down", "rater": "u-1"})
    other = send("support", {"request_id": rid, "score": 0.75, "rater": "u-2"})
    assert again.json()["replaced"] is True and other.json()["replaced"] is False
    scores = {row[1]: row[4] for row in _feedback(ledger_engine)}
    assert scores == {"u-1": Decimal("0.0000"), "u-2": Decimal("0.7500")}
    with ledger_engine.connect() as conn:
        trail = conn.execute(text(
            "SELECT rater, score FROM feedback_changes ORDER BY id"
        )).all()  # fmt: skip
    assert [tuple(t) for t in trail] == [
        ("u-1", Decimal("0.9000")), ("u-1", Decimal("0.0000")), ("u-2", Decimal("0.7500")),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"score": 0.5}, "request_id"),
        ({"request_id": "not-a-uuid", "score": 0.5}, "request_id"),
        ({"request_id": str(uuid.UUID(int=1))}, "score"),
        ({"request_id": str(uuid.UUID(int=1)), "score": 1.5}, "score"),
        ({"request_id": str(uuid.UUID(int=1)), "score": 0.5, "thumbs": "up"}, "score"),
        ({"request_id": str(uuid.UUID(int=1)), "thumbs": "sideways"}, "thumbs"),
        ({"request_id": str(uuid.UUID(int=1)), "score": 1, "labels": "x"}, "labels"),
        ({"request_id": str(uuid.UUID(int=1)), "score": 1, "comment": "x" * 1001}, "comment"),
    ],
)
def test_a_bad_body_is_a_400_naming_its_field(post: Any, body: Any, param: str) -> None:
    send, _ = post
    r = send("search", body)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param


def test_feedback_without_a_valid_key_is_a_401(post: Any, ledger: Any) -> None:
    send, keys = post
    keys["search"] = "sk-not-a-key"
    r = send("search", {"request_id": str(ledger["search"].request_id), "score": 1})
    assert r.status_code == 401, r.text
