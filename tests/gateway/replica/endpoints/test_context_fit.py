"""A chat completion held to its plan's context windows: the policy it runs under, the
trimmed request, the fallbacks kept, and the 400 when it cannot fit."""

from __future__ import annotations

import datetime as dt
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.domain.config import Config, default_config_path, load_config
from gateway.domain.endpoints import Endpoint
from gateway.domain.openai_errors import OpenAIError
from gateway.domain.token_estimate import estimate_prompt_tokens
from gateway.providers.anthropic_requests import estimate_messages
from gateway.replica.auth import Caller
from gateway.replica.chat_request import validate_chat_request
from gateway.replica.endpoints.context_fit import TRIM_HEADER, fit_context, trim_policy
from gateway.replica.endpoints.requests import responses_messages, validate_responses_request
from gateway.replica.exchange import Exchange
from gateway.replica.messages.request import validate_messages_request
from gateway.routing.policy import RoutePlan


@pytest.fixture(scope="module")
def cfg(tmp_path_factory: pytest.TempPathFactory) -> Config:
    config = yaml.safe_load(Path(default_config_path()).read_text())
    for model in config["models"]:
        if model["name"] == "gpt-4o-mini":
            model["context_window"] = 2_000
        if model["name"] == "gpt-4.1-mini":
            model["context_window"] = 1_000
        if model["name"] == "gpt-4o":
            model.pop("context_window", None)
    config["aliases"]["small-trim"] = {"candidates": {"gpt-4o-mini": 1},
                                       "fallbacks": ["gpt-4.1-mini", "gpt-4o"],
                                       "trim": "drop_oldest"}
    path = tmp_path_factory.mktemp("cfg") / "costgate.yaml"
    path.write_text(yaml.safe_dump(config))
    return load_config(path)


def exchange(messages: list[dict[str, Any]], model: str, **body: Any) -> Exchange:
    ex = Exchange(request_id=uuid.uuid4(), started=0.0, started_at=dt.datetime.now(dt.UTC),
                  caller=Caller(app="t", team=None, key_id=None), requested=model)
    ex.request = validate_chat_request({"model": model, "messages": messages, **body})
    return ex


def long_chat(turns: int = 30) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}]
    for i in range(turns):
        messages.append({"role": "user", "content": f"question {i} " + "about ledgers " * 20})
        messages.append({"role": "assistant", "content": f"answer {i} " + "the costs " * 20})
    messages.append({"role": "user", "content": "And the total?"})
    return messages


def plan(*models: str, alias: str | None = None) -> RoutePlan:
    return RoutePlan(models=models, policy="fixed", alias=alias)


def test_the_header_wins_over_the_alias_and_error_is_the_default(cfg):
    assert trim_policy(cfg, "small-trim", {}) == "drop_oldest"
    assert trim_policy(cfg, "small-trim", {TRIM_HEADER: "middle_out"}) == "middle_out"
    assert trim_policy(cfg, "gpt-4o-mini", {}) == "error"
    with pytest.raises(OpenAIError) as err:
        trim_policy(cfg, "gpt-4o-mini", {TRIM_HEADER: "shorten"})
    assert err.value.status == 400 and err.value.param == TRIM_HEADER


def test_over_the_window_with_error_is_a_400_context_length_exceeded(cfg):
    ex = exchange(long_chat(), "gpt-4o-mini", max_tokens=100)
    with pytest.raises(OpenAIError) as err:
        fit_context(ex, plan("gpt-4o-mini"), cfg, {})
    assert err.value.status == 400 and err.value.code == "context_length_exceeded"
    assert err.value.param == "messages" and "2000" in err.value.message
    assert ex.trimmed_tokens is None


def test_drop_oldest_trims_the_request_and_counts_what_it_dropped(cfg):
    messages = long_chat()
    ex = exchange(messages, "small-trim", max_tokens=100)
    out = fit_context(ex, plan("gpt-4o-mini", "gpt-4.1-mini", "gpt-4o", alias="small-trim"),
                      cfg, {})
    assert ex.request is not None
    sent = ex.request.body["messages"]
    assert sent[0] == messages[0] and sent[-1] == messages[-1]
    kept = estimate_prompt_tokens(sent, "gpt-4o-mini")
    assert kept + 100 <= 2_000 < estimate_prompt_tokens(messages, "gpt-4o-mini") + 100
    assert ex.trimmed_tokens == estimate_prompt_tokens(messages, "gpt-4o-mini") - kept
    # a fallback with a smaller window is skipped; one with no window known is kept
    assert out.models == ("gpt-4o-mini", "gpt-4o")


def test_a_request_that_fits_is_untouched(cfg):
    ex = exchange(long_chat(2), "gpt-4o-mini", max_tokens=100)
    before = ex.request
    p = plan("gpt-4o-mini", "gpt-4.1-mini")
    assert fit_context(ex, p, cfg, {}) is p
    assert ex.request is before and ex.trimmed_tokens is None


def test_a_model_without_a_window_is_not_checked(cfg):
    ex = exchange(long_chat(60), "gpt-4o")
    p = plan("gpt-4o")
    assert fit_context(ex, p, cfg, {}) is p and ex.trimmed_tokens is None


def test_other_apis_go_as_they_came(cfg):
    ex = exchange(long_chat(), "gpt-4o-mini")
    ex.endpoint = Endpoint.EMBEDDINGS
    p = plan("gpt-4o-mini")
    assert fit_context(ex, p, cfg, {}) is p


def responses_exchange(body: dict[str, Any]) -> Exchange:
    ex = exchange([{"role": "user", "content": "x"}], "small-trim")
    ex.endpoint = Endpoint.RESPONSES
    ex.request = validate_responses_request({"model": "small-trim", **body})
    return ex


def long_items(turns: int = 30) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for i in range(turns):
        items.append({"role": "user", "content": f"question {i} " + "about ledgers " * 20})
        items.append({"type": "function_call", "call_id": f"c{i}", "name": "sum",
                      "arguments": '{"x": 1}'})
        items.append({"type": "function_call_output", "call_id": f"c{i}",
                      "output": "the costs " * 20})
        items.append({"role": "assistant", "content": f"answer {i} " + "the costs " * 20})
    items.append({"role": "user", "content": "And the total?"})
    return items


def test_a_responses_input_is_trimmed_keeping_calls_with_their_outputs(cfg):
    items = long_items()
    ex = responses_exchange({"input": items, "instructions": "Be brief.",
                             "max_output_tokens": 100})
    fit_context(ex, plan("gpt-4o-mini", alias="small-trim"), cfg, {})
    assert ex.request is not None
    sent = ex.request.body["input"]
    assert ex.request.body["instructions"] == "Be brief." and sent[-1] == items[-1]
    assert len(sent) < len(items) and ex.trimmed_tokens
    calls = {i["call_id"] for i in sent if i.get("type") == "function_call"}
    outputs = {i["call_id"] for i in sent if i.get("type") == "function_call_output"}
    assert calls == outputs and calls
    prompt = responses_messages(ex.request.body)
    assert prompt is not None and estimate_prompt_tokens(prompt, "gpt-4o-mini") + 100 <= 2_000


def test_a_responses_input_over_the_window_under_error_names_input(cfg):
    ex = responses_exchange({"input": long_items()})
    with pytest.raises(OpenAIError) as err:
        fit_context(ex, plan("gpt-4o-mini"), cfg, {TRIM_HEADER: "error"})
    assert err.value.code == "context_length_exceeded" and err.value.param == "input"


def test_a_long_responses_string_cannot_be_trimmed(cfg):
    ex = responses_exchange({"input": "ledger " * 3000})
    with pytest.raises(OpenAIError) as err:
        fit_context(ex, plan("gpt-4o-mini"), cfg, {TRIM_HEADER: "drop_oldest"})
    assert err.value.code == "context_length_exceeded"


def test_a_continued_response_is_not_checked(cfg):
    ex = responses_exchange({"previous_response_id": "resp_1"})
    p = plan("gpt-4o-mini")
    assert fit_context(ex, p, cfg, {}) is p


def test_anthropic_messages_are_trimmed_in_pairs_keeping_tool_use_with_its_result(cfg):
    turns: list[dict[str, Any]] = []
    for i in range(20):
        turns.append({"role": "user", "content": f"question {i} " + "about ledgers " * 20})
        turns.append({"role": "assistant", "content": [
            {"type": "tool_use", "id": f"t{i}", "name": "sum", "input": {"x": i}}]})
        turns.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"t{i}", "content": "the costs " * 20}]})
        turns.append({"role": "assistant", "content": f"answer {i} " + "the costs " * 20})
    turns.append({"role": "user", "content": "And the total?"})
    ex = exchange([{"role": "user", "content": "x"}], "small-trim")
    ex.endpoint = Endpoint.MESSAGES
    ex.request = validate_messages_request(
        {"model": "small-trim", "max_tokens": 100, "system": "Be brief.", "messages": turns})
    fit_context(ex, plan("gpt-4o-mini", alias="small-trim"), cfg, {})
    assert ex.request is not None and ex.trimmed_tokens
    sent = ex.request.body["messages"]
    assert ex.request.body["system"] == "Be brief." and sent[-1] == turns[-1]
    assert sent[0]["role"] == "user" and isinstance(sent[0]["content"], str)
    roles = [t["role"] for t in sent]
    assert all(a != b for a, b in zip(roles, roles[1:], strict=False))
    used = [b["id"] for t in sent if isinstance(t["content"], list) for b in t["content"]
            if b["type"] == "tool_use"]
    answered = [b["tool_use_id"] for t in sent if isinstance(t["content"], list)
                for b in t["content"] if b["type"] == "tool_result"]
    assert used == answered and used
    prompt = estimate_prompt_tokens(estimate_messages(ex.request.body), "gpt-4o-mini")
    assert prompt + 100 <= 2_000
