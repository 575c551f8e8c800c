"""What the config cannot price is the client's 400 naming the field: background Responses,
hosted tools other than web search, web search and service tiers on a model without their
price; standard tiers and plain function tools pass."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.domain.config import parse_config
from gateway.domain.endpoints import Endpoint
from gateway.domain.openai_errors import OpenAIError
from gateway.domain.pricing import PriceCatalog
from gateway.quota.worst_case import Billed
from gateway.replica.endpoints.billable import check_plan, check_priceable


@pytest.mark.parametrize(("endpoint", "body", "param"), [
    (Endpoint.RESPONSES, {"background": True}, "background"),
    (Endpoint.RESPONSES, {"tools": [{"type": "function", "name": "f"},
                                    {"type": "file_search"}]}, "tools[1].type"),
    (Endpoint.RESPONSES, {"tools": [{"type": "code_interpreter"}]}, "tools[0].type"),
    (Endpoint.RESPONSES, {"tools": [{"type": "image_generation"}]}, "tools[0].type"),
    (Endpoint.RESPONSES, {"tools": [{"type": "mcp", "server_url": "x"}]}, "tools[0].type"),
    (Endpoint.CHAT_COMPLETIONS, {"service_tier": ["auto"]}, "service_tier"),
    (Endpoint.CHAT_COMPLETIONS, {"web_search_options": {}}, "web_search_options"),
    (Endpoint.MESSAGES, {"tools": [{"type": "web_fetch_20250910"}]}, "tools[0].type"),
    (Endpoint.MESSAGES, {"tools": [{"type": "code_execution_20250825"}]}, "tools[0].type"),
    (Endpoint.MESSAGES, {"mcp_servers": [{"type": "url", "url": "x"}]}, "mcp_servers"),
])  # fmt: skip
def test_what_has_no_price_is_a_400_naming_the_field(
    endpoint: Endpoint, body: dict[str, Any], param: str
) -> None:
    with pytest.raises(OpenAIError) as err:
        check_priceable(endpoint, body)
    assert (err.value.status, err.value.param, err.value.code) == (400, param, "unpriced_feature")


@pytest.mark.parametrize(("endpoint", "body", "billed"), [
    (Endpoint.RESPONSES, {"background": False, "tools": [{"type": "function", "name": "f"}]},
     Billed()),
    (Endpoint.CHAT_COMPLETIONS, {"service_tier": "auto", "tools": [{"type": "function"}]},
     Billed()),
    (Endpoint.CHAT_COMPLETIONS, {"service_tier": "flex"}, Billed(service_tier="flex")),
    (Endpoint.CHAT_COMPLETIONS, {"service_tier": "priority"}, Billed(service_tier="priority")),
    (Endpoint.RESPONSES, {"max_tool_calls": 4, "tools": [{"type": "web_search_preview"}]},
     Billed(web_search="tools[0].type", max_searches=4)),
    (Endpoint.MESSAGES, {"service_tier": "standard_only",
                         "tools": [{"name": "get_weather", "input_schema": {}},
                                   {"type": "custom", "name": "c"},
                                   {"type": "web_search_20250305", "name": "web_search",
                                    "max_uses": 2},
                                   {"type": "bash_20250124", "name": "bash"}]},
     Billed(web_search="tools[2].type", max_searches=2)),
    (Endpoint.CHAT_COMPLETIONS, {"tools": "not a list: validation's business"}, Billed()),
])  # fmt: skip
def test_standard_tiers_client_tools_and_what_a_price_may_cover_pass(
    endpoint: Endpoint, body: dict[str, Any], billed: Billed
) -> None:
    assert check_priceable(endpoint, body) == billed


def _catalog(prices: dict[str, Any]) -> PriceCatalog:
    cfg = parse_config({
        "providers": [{"name": "p", "base_url": "http://127.0.0.1:1/v1"}],
        "models": [
            {"name": "tiered", "provider": "p", "upstream_model": "t", "list_prices": prices},
            {"name": "plain", "provider": "p", "upstream_model": "q",
             "list_prices": {"input": 1, "output": 2}},
        ],
    })  # fmt: skip
    return PriceCatalog.from_config(cfg)


CAT = _catalog({"input": 1, "output": 2, "service_tiers": {"flex": {"input": 1, "output": 1}},
                "tool_fees": {"web_search": "0.01"}})  # fmt: skip


def test_a_priced_tier_and_fee_pass_on_the_models_that_price_them() -> None:
    check_plan(Billed(service_tier="flex", web_search="tools[0].type"), CAT, ["tiered"])
    check_plan(Billed(), CAT, ["tiered", "plain"])


@pytest.mark.parametrize(("billed", "models", "param"), [
    (Billed(service_tier="priority"), ["tiered"], "service_tier"),
    (Billed(service_tier="flex"), ["tiered", "plain"], "service_tier"),  # a fallback too
    (Billed(web_search="tools[1].type"), ["plain"], "tools[1].type"),
])  # fmt: skip
def test_a_tier_or_tool_a_model_of_the_route_does_not_price_is_a_400(
    billed: Billed, models: list[str], param: str
) -> None:
    with pytest.raises(OpenAIError) as err:
        check_plan(billed, CAT, models)
    assert (err.value.status, err.value.param, err.value.code) == (400, param, "unpriced_feature")
    assert repr(models[-1]) in err.value.message or repr(models[0]) in err.value.message
