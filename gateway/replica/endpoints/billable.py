"""What a request can make the provider bill, and whether the config prices it. Pure.

The worst case (`gateway.quota.worst_case`) prices tokens: the prompt, each output `n` or
`best_of` asks for, at the dearest tier the prompt may reach. A few request fields make
the provider bill beyond that, by the call or at another rate, or later, out of sight:

- a Responses request with `background: true` runs after the answer (`queued`): the
  generation is billed later, and the gateway never sees its usage;
- hosted tools: OpenAI's web search, file search, code interpreter, image generation,
  remote MCP, and Anthropic's server tools (web search, web fetch, code execution, the MCP
  connector) bill per call and feed results back as input tokens that no one counts
  beforehand;
- a service tier other than the standard one (`flex`, `priority`, `scale`) bills the
  same tokens at its own rates.

Two of them are priced when the config says so: a service tier with prices in the
model's `service_tiers`, and web search (Responses' `web_search*` tool, Anthropic's
`web_search_*` server tool) with a `tool_fees.web_search` fee, since the provider reports
its calls (Responses' `web_search_call` items, Anthropic's `server_tool_use`). Each model
the route may try must price them (`check_plan`). Everything else, and these without a
price, is the client's 400 naming the field, before anything is sent upstream: never
admitted with a bound that does not hold.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from gateway.domain.endpoints import Endpoint
from gateway.domain.openai_errors import OpenAIError, bad_request
from gateway.domain.pricing import PriceCatalog, service_tier_name
from gateway.quota.worst_case import Billed

# tool types that run at the provider and bill per call (prefixes: types carry versions,
# web_search_preview_2025_03_11, web_search_20250305, code_execution_20250825...)
HOSTED_TOOL_PREFIXES = (
    "web_search", "web_fetch", "file_search", "code_interpreter", "code_execution",
    "image_generation", "mcp",
)  # fmt: skip
# the hosted tool whose calls the provider reports in usage: priced by a fee per call
# (chat completions' `web_search_options` reports no calls, so it stays unpriced)
WEB_SEARCH_PREFIX = "web_search"
_WEB_SEARCH_ENDPOINTS = (Endpoint.RESPONSES, Endpoint.MESSAGES)


def _unpriced(param: str, what: str) -> OpenAIError:
    return bad_request(
        f"`{param}` {what}, which the gateway has no price for: it cannot be held to a "
        "budget or recorded at its cost.",
        param=param,
        code="unpriced_feature",
    )


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def check_priceable(endpoint: Endpoint, body: dict[str, Any]) -> Billed:
    """Raise the client's 400 for the first field of `body` that no config can price;
    return what a model's prices must cover (`check_plan`)."""
    if endpoint is Endpoint.RESPONSES and body.get("background") not in (None, False):
        raise _unpriced("background", "runs the response after the answer, billed later")
    tier = body.get("service_tier")
    if tier is not None and not isinstance(tier, str):
        raise _unpriced("service_tier", f"asks for the {str(tier)[:40]!r} tier")
    if endpoint is Endpoint.CHAT_COMPLETIONS and body.get("web_search_options") is not None:
        raise _unpriced("web_search_options", "asks for a hosted web search, billed per call")
    if endpoint is Endpoint.MESSAGES and body.get("mcp_servers"):
        raise _unpriced("mcp_servers", "connects hosted MCP servers, whose results are input")
    billed = Billed(service_tier=service_tier_name(tier))
    tools = body.get("tools")
    if not isinstance(tools, list):
        return billed
    for i, tool in enumerate(tools):
        kind = tool.get("type") if isinstance(tool, dict) else None
        if not isinstance(kind, str) or not kind.startswith(HOSTED_TOOL_PREFIXES):
            continue
        if kind.startswith(WEB_SEARCH_PREFIX) and endpoint in _WEB_SEARCH_ENDPOINTS:
            if billed.web_search is None:
                assert isinstance(tool, dict)
                cap = (_count(body.get("max_tool_calls")) if endpoint is Endpoint.RESPONSES
                       else _count(tool.get("max_uses")))  # fmt: skip
                billed = dataclasses.replace(billed, web_search=f"tools[{i}].type",
                                             max_searches=cap)  # fmt: skip
            continue
        raise _unpriced(f"tools[{i}].type", f"is the hosted tool {kind[:60]!r}, billed by call")
    return billed


def check_plan(billed: Billed, catalog: PriceCatalog, models: Iterable[str]) -> None:
    """The client's 400 when a model the route may try has no price for the request's
    service tier or no fee for its web search (a model without any price stays as it
    was: its cost is unknown, and a hard budget refuses it)."""
    if billed.service_tier is None and billed.web_search is None:
        return
    for model in models:
        version = catalog.version(model)
        if version is None:
            continue
        rates = (version.list_rates, version.billed_rates)
        tier = billed.service_tier
        if tier is not None and not all(tier in dict(r.service_tiers) for r in rates):
            raise _unpriced("service_tier", f"asks for the {tier!r} tier, unpriced on {model!r}")
        if billed.web_search is not None and any(r.fee("web_search") is None for r in rates):
            raise _unpriced(billed.web_search, f"asks for web search, with no fee on {model!r}")
