"""Legacy completions and Responses bodies read into the simulator's `ChatRequest` (one
reply plan for every format), and embeddings inputs read as texts or token arrays.

Apart from the gateway's own validation on purpose: the simulator checks what the gateway
sends, it must not share its mistakes.
"""

from __future__ import annotations

import json
from typing import Any

from gateway.devtools.sim.request import (
    MAX_CHOICES,
    ChatRequest,
    InvalidRequest,
    service_tier,
    web_searches,
)
from gateway.devtools.sim.tokens import count_text


def _model(body: Any) -> str:
    if not isinstance(body, dict):
        raise InvalidRequest("The request body must be a JSON object.")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise InvalidRequest("You must provide a model parameter.", "model")
    return model


def _cap(body: dict[str, Any], name: str, upper: int | None = None) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidRequest(f"Invalid '{name}': expected an integer >= 1, got {value!r}.", name)
    if upper is not None and value > upper:
        raise InvalidRequest(f"Invalid '{name}': at most {upper}.", name)
    return value


def _tokens(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(
        isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in value)


def inputs(value: Any, param: str) -> list[str | list[int]]:
    """A string, strings, a token array or token arrays, as a list of items."""
    if isinstance(value, str):
        return [value]
    if _tokens(value):
        return [list(value)]
    if isinstance(value, list) and value and all(isinstance(v, str) or _tokens(v) for v in value):
        return list(value)
    raise InvalidRequest(f"Invalid '{param}': expected a string, an array of strings, or "
                         "token arrays.", param)


def item_tokens(item: str | list[int]) -> int:
    return count_text(item) if isinstance(item, str) else len(item)


def parse_completions(body: Any) -> tuple[ChatRequest, int]:
    """The request and its exact prompt tokens (a legacy prompt has no chat framing)."""
    model = _model(body)
    if "prompt" not in body:
        raise InvalidRequest("Missing required parameter: 'prompt'.", "prompt")
    prompts = inputs(body["prompt"], "prompt")
    stream = body.get("stream") is True
    options = body.get("stream_options")
    if options is not None and not stream:
        raise InvalidRequest("The 'stream_options' parameter is only allowed when 'stream' "
                             "is enabled.", "stream_options")
    text = "".join(p if isinstance(p, str) else " ".join(map(str, p)) for p in prompts)
    n = _cap(body, "n", MAX_CHOICES) or 1
    chat = ChatRequest(
        model=model, messages=({"role": "user", "content": text},), stream=stream,
        include_usage=isinstance(options, dict) and options.get("include_usage") is True,
        n=n, max_tokens=_cap(body, "max_tokens"),
        seed=body.get("seed") if isinstance(body.get("seed"), int) else None,
    )
    return chat, sum(item_tokens(p) for p in prompts)


def _response_tool(tool: Any) -> dict[str, Any] | None:
    """A Responses function tool ({type, name, parameters}) in chat's shape."""
    if not isinstance(tool, dict) or tool.get("type") != "function":
        return None
    return {"type": "function", "function": {"name": tool.get("name"),
                                             "parameters": tool.get("parameters")}}


def _item_message(item: dict[str, Any]) -> dict[str, Any]:
    kind = item.get("type")
    if kind == "function_call_output":
        return {"role": "tool", "content": str(item.get("output"))}
    if kind == "function_call":
        return {"role": "assistant", "content": str(item.get("arguments"))}
    content = item.get("content")
    if isinstance(content, list):
        content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return {"role": str(item.get("role") or "user"), "content": content if isinstance(
        content, str) else json.dumps(content)}


def parse_responses(body: Any) -> ChatRequest:
    model = _model(body)
    given = body.get("input")
    messages: list[dict[str, Any]] = []
    if isinstance(body.get("instructions"), str):
        messages.append({"role": "system", "content": body["instructions"]})
    if isinstance(given, str):
        messages.append({"role": "user", "content": given})
    elif isinstance(given, list):
        for i, item in enumerate(given):
            if not isinstance(item, dict):
                raise InvalidRequest(f"Invalid 'input[{i}]': expected an object.", f"input[{i}]")
            messages.append(_item_message(item))
    elif body.get("previous_response_id") is None:
        raise InvalidRequest("Missing required parameter: 'input'.", "input")
    tools = [t for t in map(_response_tool, body.get("tools") or ()) if t is not None]
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("name"):
        choice = {"type": "function", "function": {"name": choice["name"]}}
    return ChatRequest(
        model=model, messages=tuple(messages or [{"role": "user", "content": ""}]),
        stream=body.get("stream") is True, include_usage=True,
        max_tokens=_cap(body, "max_output_tokens"), tools=tuple(tools), tool_choice=choice,
        service_tier=service_tier(body),
        web_searches=web_searches(body.get("tools"), body.get("max_tool_calls")),
    )
