"""Provider objects bound to the app that created them, through the plain gateway, the
real sim and the ledger's PostgreSQL: another app naming one gets a 404."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from sqlalchemy import Engine, text

from db.engine import make_engine
from db.shared_state.provider_objects import PostgresObjectStore
from gateway.replica.auth import Caller, KeyRing
from gateway.replica.objects.registry import ProviderObjects

KEY_A, KEY_B = "cg-objects-a-" + uuid.uuid4().hex, "cg-objects-b-" + uuid.uuid4().hex


@pytest.fixture
def two_apps(gw: Any, ledger_engine: Engine) -> Iterator[Any]:
    """The plain gateway with keys of apps `app-a` and `app-b`, and its owners in
    PostgreSQL through a registry of its own (another replica's memory: none)."""
    from db.keys import hash_key

    service = gw.service
    saved = service.keys, service.objects
    ring = KeyRing(require_keys=True)
    ring.replace({hash_key(KEY_A): Caller(app="app-a", team=None, key_id=uuid.uuid4()),
                  hash_key(KEY_B): Caller(app="app-b", team=None, key_id=uuid.uuid4())})
    service.keys = ring
    service.objects = ProviderObjects(PostgresObjectStore(ledger_engine))
    yield gw
    service.keys, service.objects = saved


def client(gw: Any, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.base_url + "/v1", api_key=key, max_retries=0)


def test_an_app_continues_its_own_response_and_another_app_gets_a_404(two_apps, ledger_engine):
    first = client(two_apps, KEY_A).responses.create(model="gpt-4.1", input="Hello")
    with ledger_engine.connect() as conn:
        owner = conn.execute(text("SELECT app, kind FROM provider_objects WHERE object_id = :i"),
                             {"i": first.id}).one()
    assert tuple(owner) == ("app-a", "response")
    # a new replica's memory (nothing cached): the owner comes from PostgreSQL
    two_apps.service.objects = ProviderObjects(PostgresObjectStore(ledger_engine))
    follow = client(two_apps, KEY_A).responses.create(
        model="gpt-4.1", input="And then?", previous_response_id=first.id)
    assert follow.id != first.id
    records_before = len(two_apps.records)
    with pytest.raises(openai.NotFoundError) as refused:
        client(two_apps, KEY_B).responses.create(
            model="gpt-4.1", input="Tell me what A said", previous_response_id=first.id)
    error = refused.value.body
    assert error["param"] == "previous_response_id" and error["code"] == "not_found"
    # refused before any upstream call, and recorded as the client's error
    (record,) = two_apps.wait_records(records_before + 1)[records_before:]
    assert record.app == "app-b" and record.http_status == 404 and record.attempts == 0


def test_a_streamed_response_is_bound_before_its_first_byte(two_apps):
    with client(two_apps, KEY_A).responses.stream(model="gpt-4.1", input="Hi") as stream:
        created = next(e for e in stream if e.type == "response.created")
        response_id = created.response.id
        resp = httpx.post(two_apps.base_url + "/v1/responses", timeout=30,
                          headers={"authorization": f"Bearer {KEY_B}"},
                          json={"model": "gpt-4.1", "input": "x",
                                "previous_response_id": response_id})
        assert resp.status_code == 404
        stream.get_final_response()


@pytest.mark.parametrize("body, param", [
    ({"conversation": "conv_made_up"}, "conversation"),
    ({"conversation": {"id": "conv_made_up"}}, "conversation"),
    ({"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "file-x"}]}]},
     "input.file_id"),
    ({"tools": [{"type": "file_search", "vector_store_ids": ["vs_x"]}]},
     "tools[0].vector_store_ids"),
    ({"tools": [{"type": "code_interpreter", "container": "cntr_x"}]}, "tools[0].container"),
])
def test_ids_no_app_created_through_the_gateway_are_a_404(two_apps, body, param):
    resp = httpx.post(two_apps.base_url + "/v1/responses", timeout=30,
                      headers={"authorization": f"Bearer {KEY_A}"},
                      json={"model": "gpt-4.1", "input": "x", **body})
    assert resp.status_code == 404, resp.text
    assert resp.json()["error"]["param"] == param


def test_an_anthropic_file_of_no_app_is_a_404_on_messages(two_apps):
    source = {"type": "file", "file_id": "file_011CNha8iCJcU1wXNR6q4V8w"}
    resp = httpx.post(two_apps.base_url + "/v1/messages", timeout=30,
                      headers={"x-api-key": KEY_A, "anthropic-version": "2023-06-01"},
                      json={"model": "gpt-4.1", "max_tokens": 20, "messages": [
                          {"role": "user", "content": [{"type": "document", "source": source}]}]})
    assert resp.status_code == 404, resp.text
    assert resp.json()["error"]["type"] == "not_found_error"


def test_with_postgresql_away_an_id_not_in_memory_is_a_503_never_served(
    two_apps, database_proxy, ledger_engine
):
    first = client(two_apps, KEY_A).responses.create(model="gpt-4.1", input="Hello")
    # a replica that never saw the id, whose database is cut off
    engine = make_engine(database_proxy.url, pool_size=1, max_overflow=0)
    try:
        two_apps.service.objects = ProviderObjects(PostgresObjectStore(engine))
        database_proxy.block()
        resp = httpx.post(two_apps.base_url + "/v1/responses", timeout=30,
                          headers={"authorization": f"Bearer {KEY_B}"},
                          json={"model": "gpt-4.1", "input": "x",
                                "previous_response_id": first.id})
        assert resp.status_code == 503 and resp.json()["error"]["code"] == "objects_unavailable"
    finally:
        database_proxy.unblock()
        engine.dispose()
