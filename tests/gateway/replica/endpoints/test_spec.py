"""Which models serve which API, how a plan keeps only those, and how a Responses event is
written for the client."""

from __future__ import annotations

import json

import pytest

from gateway.domain.config import default_config_path, load_config
from gateway.domain.endpoints import Endpoint
from gateway.domain.openai_errors import OpenAIError
from gateway.replica.endpoints.spec import (
    RESPONSES_FORMAT,
    SPECS,
    model_endpoints,
    serving_plan,
)
from gateway.routing.policy import RoutePlan

CFG = load_config(default_config_path())


def test_an_embedding_model_serves_embeddings_only_and_a_chat_model_never_does():
    assert model_endpoints(CFG, CFG.models_by_name["text-embedding-3-small"]) == {
        Endpoint.EMBEDDINGS}
    served = model_endpoints(CFG, CFG.models_by_name["gpt-4.1"])
    assert {Endpoint.CHAT_COMPLETIONS, Endpoint.COMPLETIONS, Endpoint.RESPONSES} <= served
    assert Endpoint.EMBEDDINGS not in served


def test_a_plan_keeps_the_models_that_serve_the_api():
    plan = RoutePlan(models=("gpt-4.1", "gpt-4o-mini"), policy="fixed", alias=None)
    assert serving_plan(plan, Endpoint.RESPONSES, CFG, "gpt-4.1") is plan


def test_a_plan_with_no_model_serving_the_api_is_a_400_naming_the_route():
    plan = RoutePlan(models=("gpt-4.1",), policy="fixed", alias=None)
    with pytest.raises(OpenAIError) as err:
        serving_plan(plan, Endpoint.EMBEDDINGS, CFG, "gpt-4.1")
    assert err.value.status == 400 and err.value.code == "unsupported_endpoint"
    assert "/v1/embeddings" in err.value.message and err.value.param == "model"


def test_a_responses_event_is_named_and_carries_the_public_model():
    event = {"type": "response.completed", "response": {"model": "gpt-4.1-2025", "usage": {}}}
    out = RESPONSES_FORMAT.encode(event, "auto", False)
    assert out is not None
    name, data = out.decode().strip().split("\n")
    assert name == "event: response.completed"
    assert json.loads(data.removeprefix("data: "))["response"]["model"] == "auto"
    assert RESPONSES_FORMAT.done is None  # no [DONE] after a Responses stream
    assert b"event: error" in RESPONSES_FORMAT.error("cut")


def test_every_openai_api_has_a_spec():
    assert set(SPECS) == {Endpoint.CHAT_COMPLETIONS, Endpoint.COMPLETIONS, Endpoint.EMBEDDINGS,
                          Endpoint.RESPONSES}
