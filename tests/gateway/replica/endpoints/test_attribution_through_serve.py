"""Acceptance: end users, sessions and tags land on the row of every endpoint, through the
official openai and anthropic SDKs against the deployed gateway (Ray Serve, `costgate up`),
and so do a cache hit's, a budget refusal's and an abandoned stream's; invalid values get a
400 naming the field and never reach the upstream."""

from __future__ import annotations

import time
import uuid
from decimal import Decimal
from typing import Any

import anthropic
import openai
import pytest

from db.budgets import remove_budget, set_budget
from db.keys import create_key
from gateway.domain.budgets import BudgetPeriod, BudgetScope
from tests.gateway.replica.endpoints.test_openai_sdk_through_serve import ledger_row

pytestmark = pytest.mark.ray
MESSAGES = [{"role": "user", "content": "Name three colours."}]


def sdk(gateway: Any, key: str | None = None, **headers: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=gateway.base_url + "/v1", api_key=key or gateway.api_key,
                         max_retries=0, timeout=60, default_headers=headers)  # fmt: skip


def claude(gateway: Any, **headers: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=gateway.base_url, api_key=gateway.api_key,
                               max_retries=0, timeout=60, default_headers=headers)  # fmt: skip


def attribution(row: dict[str, Any]) -> tuple[Any, Any, Any]:
    return row["end_user"], row["session_id"], row["tags"]


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_every_openai_endpoint_records_the_user_session_and_tags(gateway):
    session = fresh("conv")
    headers = {"x-costgate-session": session, "x-costgate-tags": "feature=search,env=test"}
    client = sdk(gateway, **headers)
    calls = {
        "chat.completions": lambda u: client.chat.completions.with_raw_response.create(
            model="gpt-4o-mini", messages=MESSAGES, max_tokens=20, user=u,
            metadata={"plan": "pro"}),
        "completions": lambda u: client.completions.with_raw_response.create(
            model="gpt-4o-mini", prompt="Say hi.", max_tokens=10, user=u),
        "embeddings": lambda u: client.embeddings.with_raw_response.create(
            model="text-embedding-3-small", input="hello", user=u),
        "responses": lambda u: client.responses.with_raw_response.create(
            model="gpt-4o-mini", input="Say hi.", max_output_tokens=16,
            safety_identifier=u, metadata={"plan": "pro"}),
    }  # fmt: skip
    for endpoint, call in calls.items():
        user = fresh("cust")
        raw = call(user)
        raw.parse()
        row = ledger_row(gateway, raw.headers["x-costgate-request-id"])
        assert row["endpoint"] == endpoint and row["status"] == "ok"
        tags = {"feature": "search", "env": "test"}
        if endpoint in ("chat.completions", "responses"):
            tags["plan"] = "pro"  # OpenAI's metadata: tags too
        assert attribution(row) == (user, session, tags), endpoint
        # what the provider bills and the list price, on the answer, as the row has them
        assert Decimal(raw.headers["x-costgate-cost-usd"]) == row["actual_cost_usd"]
        assert Decimal(raw.headers["x-costgate-list-cost-usd"]) == row["list_cost_usd"]


def test_the_header_wins_over_the_body_and_tags_add_to_metadata(gateway):
    client = sdk(gateway, **{"x-costgate-user": "from-header", "x-costgate-tags": "feature=header"})
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-4o-mini",
        messages=MESSAGES,
        max_tokens=10,
        user="from-body",
        metadata={"feature": "body", "team": "blue"},
    )
    row = ledger_row(gateway, raw.headers["x-costgate-request-id"])
    assert row["end_user"] == "from-header"
    assert row["tags"] == {"feature": "header", "team": "blue"}


def test_anthropic_messages_record_metadata_user_id_plain_and_streamed(gateway):
    client = claude(
        gateway, **{"x-costgate-session": "s-claude", "x-costgate-tags": "feature=chat"}
    )
    user = fresh("claude-user")
    raw = client.messages.with_raw_response.create(
        model="claude-haiku-4.5", max_tokens=32, messages=MESSAGES, metadata={"user_id": user}
    )
    raw.parse()
    row = ledger_row(gateway, raw.headers["x-costgate-request-id"])
    assert attribution(row) == (user, "s-claude", {"feature": "chat"})
    assert Decimal(raw.headers["x-costgate-cost-usd"]) == row["actual_cost_usd"]
    with client.messages.with_streaming_response.create(
        model="claude-haiku-4.5",
        max_tokens=32,
        messages=MESSAGES,
        stream=True,
        metadata={"user_id": user},
    ) as streamed:
        request_id = streamed.headers["x-costgate-request-id"]
        assert "x-costgate-cost-usd" not in streamed.headers  # not known before the end
        list(streamed.parse())
    row = ledger_row(gateway, request_id)
    assert row["stream"] is True and attribution(row) == (user, "s-claude", {"feature": "chat"})


def test_a_cache_hit_records_its_own_callers_attribution(gateway):
    body = {
        "model": "gpt-4o-mini",
        "max_tokens": 20,
        "messages": [{"role": "user", "content": f"cache me {uuid.uuid4().hex}"}],
    }
    with gateway.client() as client:
        # the entry is stored after the answer went out: repeat until one answers a hit
        # the end user is part of the cache's key (one customer's answer is not another's):
        # the same user, a new session each time
        user = fresh("hit-user")
        for i in range(12):
            r = client.post(
                "/v1/chat/completions",
                json=body | {"user": user},
                headers={"x-costgate-cache": "on", "x-costgate-session": f"s{i}"},
            )
            assert r.status_code == 200
            if r.headers.get("x-costgate-cache") == "hit":
                break
        else:
            raise AssertionError("no cache hit in 12 repeats")
    assert r.headers["x-costgate-cost-usd"] == "0"
    row = ledger_row(gateway, r.headers["x-costgate-request-id"])
    assert row["cache_hit"] is True and attribution(row) == (user, f"s{i}", None)


def test_a_budget_refusal_records_the_attribution(gateway):
    app = fresh("attr-budget")
    key, _ = create_key(gateway.database_url, app)
    set_budget(gateway.database_url, BudgetScope.APP, app, BudgetPeriod.DAY, Decimal(0),
               actor="test")  # fmt: skip
    try:
        client = sdk(gateway, key, **{"x-costgate-session": "s-refused"})
        deadline = time.monotonic() + 30  # replicas reload budgets within seconds
        while True:
            try:
                client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES,
                                               max_tokens=10, user="refused-user")  # fmt: skip
            except openai.RateLimitError as err:
                request_id = err.response.headers["x-costgate-request-id"]
                assert err.code == "budget_exceeded"
                break
            assert time.monotonic() < deadline, "the budget never applied"
    finally:
        remove_budget(gateway.database_url, BudgetScope.APP, app, actor="test")
    row = ledger_row(gateway, request_id)
    assert row["http_status"] == 429 and row["error_class"] == "budget_exceeded"
    assert attribution(row) == ("refused-user", "s-refused", None)


def test_a_client_that_hangs_up_leaves_a_row_with_the_attribution(gateway, sim):
    sim.set_behaviour("gpt-4o-mini", per_token_ms=50)  # a stream that lasts seconds
    with (
        gateway.client() as client,
        client.stream(
            "POST",
            "/v1/chat/completions",
            json={"model": "gpt-4o-mini", "messages": MESSAGES, "max_tokens": 400, "stream": True},
            headers={"x-costgate-user": "leaver", "x-costgate-tags": "feature=hangup"},
        ) as r,
    ):
        request_id = r.headers["x-costgate-request-id"]
        for line in r.iter_lines():
            if line.startswith("data: "):
                break  # the first event, then hang up
    row = ledger_row(gateway, request_id)
    assert row["status"] == "cancelled"
    assert attribution(row) == ("leaver", None, {"feature": "hangup"})


@pytest.mark.parametrize(
    ("headers", "body", "param"),
    [
        ({}, {"user": "u" * 300}, "user"),
        ({}, {"metadata": {f"k{i}": "v" for i in range(17)}}, "metadata"),
        ({"x-costgate-tags": ",".join(f"k{i}=v" for i in range(17))}, {}, "x-costgate-tags"),
        # a non-breaking space (Latin-1 on the wire): not printable text
        ({"x-costgate-tags": b"feature=se\xa0arch"}, {}, "x-costgate-tags"),
        ({}, {"metadata": {"feature": "a\nb"}}, "metadata"),
        ({"x-costgate-session": "s" * 257}, {}, "x-costgate-session"),
        ({}, {"safety_identifier": 42}, "safety_identifier"),
    ],
)
def test_an_invalid_value_is_a_400_naming_it_and_no_upstream_call(gateway, sim, headers, body,
                                                                   param):  # fmt: skip
    before = sim.stats()["total"]
    with gateway.client() as client:
        r = client.post(
            "/v1/chat/completions",
            headers=headers,
            json={"model": "gpt-4o-mini", "messages": MESSAGES, "max_tokens": 5} | body,
        )
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param
    row = ledger_row(gateway, r.headers["x-costgate-request-id"])
    assert row["status"] == "client_error" and row["attempts"] == 0
    assert sim.stats()["total"] == before


def test_an_invalid_anthropic_user_id_is_a_400_through_the_sdk(gateway, sim):
    before = sim.stats()["total"]
    with pytest.raises(anthropic.BadRequestError) as caught:
        claude(gateway).messages.create(
            model="claude-haiku-4.5",
            max_tokens=8,
            messages=MESSAGES,
            metadata={"user_id": "x" * 300},
        )
    assert "metadata.user_id" in str(caught.value)
    assert sim.stats()["total"] == before


def test_a_keys_default_tags_and_allowed_keys(gateway):
    key, _ = create_key(gateway.database_url, fresh("attr-keys"),
                        default_tags={"env": "prod"}, allowed_tag_keys=["feature"])  # fmt: skip
    client = sdk(gateway, key, **{"x-costgate-tags": "feature=search"})
    deadline = time.monotonic() + 30  # a new key reaches every replica within seconds
    while True:
        try:
            raw = client.chat.completions.with_raw_response.create(
                model="gpt-4o-mini", messages=MESSAGES, max_tokens=5
            )
            break
        except openai.AuthenticationError:
            assert time.monotonic() < deadline
            time.sleep(0.5)
    row = ledger_row(gateway, raw.headers["x-costgate-request-id"])
    assert row["tags"] == {"env": "prod", "feature": "search"}
    with pytest.raises(openai.BadRequestError) as caught:
        sdk(gateway, key, **{"x-costgate-tags": "team=blue"}).chat.completions.create(
            model="gpt-4o-mini", messages=MESSAGES, max_tokens=5
        )
    assert "team" in str(caught.value)
