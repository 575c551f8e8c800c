"""Provider objects through the deployed gateway (Ray Serve, 2 replicas, PostgreSQL): a
response app A created is continued by A on any replica and is a 404 for app B."""

from __future__ import annotations

import uuid

import openai
import pytest

from db.keys import create_key

pytestmark = pytest.mark.ray


def test_app_b_naming_app_as_previous_response_id_gets_a_404(gateway) -> None:
    suffix = uuid.uuid4().hex[:8]
    key_a, _ = create_key(gateway.database_url, f"objects-a-{suffix}")
    key_b, _ = create_key(gateway.database_url, f"objects-b-{suffix}")

    def client(key: str) -> openai.OpenAI:
        return openai.OpenAI(base_url=gateway.base_url + "/v1", api_key=key, max_retries=0)

    first = client(key_a).responses.create(model="gpt-4.1", input="Hello")
    # the owner continues it on whichever replica answers, each time
    replicas: set[str] = set()
    for _ in range(30):
        raw = client(key_a).responses.with_raw_response.create(
            model="gpt-4.1", input="And then?", previous_response_id=first.id)
        replicas.add(raw.headers["x-costgate-replica"])
        if len(replicas) == 2:
            break
    assert len(replicas) == 2, replicas
    for _ in range(4):
        with pytest.raises(openai.NotFoundError) as refused:
            client(key_b).responses.create(
                model="gpt-4.1", input="What did A say?", previous_response_id=first.id)
        assert refused.value.body["param"] == "previous_response_id"
