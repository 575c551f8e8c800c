"""A Responses request body as a chat completions body. Pure.

Input items map one to one (messages, function calls and their outputs); what only
OpenAI's own Responses API can do (stored conversations, built-in tools, reasoning
settings) is a 400 naming it (`Untranslatable`), never dropped.
"""

from __future__ import annotations

from typing import Any

from gateway.providers.translation import Untranslatable, guarded, obj

ROUTE = "Responses to an upstream without a Responses API"
_MAPPED = frozenset({"model", "input", "instructions", "max_output_tokens", "temperature",
                     "top_p", "tools", "tool_choice", "parallel_tool_calls", "stream", "text",
                     "user", "safety_identifier"})
# nothing the model generates depends on them
_IGNORED = frozenset({"metadata", "store", "service_tier", "stream_options", "truncation"})


def _text_part(part: dict[str, Any], where: str) -> dict[str, Any]:
    kind = part.get("type")
    if kind in ("input_text", "output_text", "text"):
        return {"type": "text", "text": str(part.get("text", ""))}
    if kind == "input_image" and isinstance(part.get("image_url"), str):
        return {"type": "image_url", "image_url": {"url": part["image_url"]}}
    raise Untranslatable(f"an input part of type {kind!r}", ROUTE, where)


def _message(item: dict[str, Any], where: str) -> dict[str, Any]:
    role = item.get("role")
    if role not in ("user", "system", "developer", "assistant"):
        raise Untranslatable(f"an input message of role {role!r}", ROUTE, f"{where}.role")
    content = item.get("content")
    if isinstance(content, str):
        return {"role": role, "content": content}
    if not isinstance(content, list):
        raise Untranslatable("an input message without content", ROUTE, where)
    parts = [_text_part(obj(p), f"{where}.content[{j}]") for j, p in enumerate(content)]
    if all(p["type"] == "text" for p in parts):
        return {"role": role, "content": "".join(p["text"] for p in parts)}
    return {"role": role, "content": parts}


def _input(given: Any) -> list[dict[str, Any]]:
    if isinstance(given, str):
        return [{"role": "user", "content": given}]
    out: list[dict[str, Any]] = []
    for i, raw in enumerate(given or ()):
        item, where = obj(raw), f"input[{i}]"
        kind = item.get("type", "message")
        if kind == "message":
            out.append(_message(item, where))
        elif kind == "function_call":
            call = {"id": str(item.get("call_id", "")), "type": "function",
                    "function": {"name": str(item.get("name", "")),
                                 "arguments": str(item.get("arguments", ""))}}
            last = out[-1] if out else None
            if last is not None and last["role"] == "assistant" and "tool_calls" in last:
                last["tool_calls"].append(call)  # parallel calls: one assistant turn
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            output = item.get("output")
            out.append({"role": "tool", "tool_call_id": str(item.get("call_id", "")),
                        "content": output if isinstance(output, str) else str(output)})
        else:
            raise Untranslatable(f"an input item of type {kind!r}", ROUTE, where)
    return out


def _tools(tools: Any) -> list[dict[str, Any]]:
    out = []
    for i, raw in enumerate(tools or ()):
        tool = obj(raw)
        if tool.get("type") != "function":
            raise Untranslatable(f"the built-in tool {tool.get('type')!r}", ROUTE, f"tools[{i}]")
        fn: dict[str, Any] = {"name": tool.get("name"),
                              "parameters": tool.get("parameters") or {"type": "object"}}
        if tool.get("description"):
            fn["description"] = tool["description"]
        out.append({"type": "function", "function": fn})
    return out


def _tool_choice(choice: Any) -> Any:
    if choice in (None, "auto", "none", "required"):
        return choice
    if isinstance(choice, dict) and choice.get("type") == "function":
        return {"type": "function", "function": {"name": choice.get("name")}}
    raise Untranslatable(f"tool_choice {choice!r}", ROUTE, "tool_choice")


def _response_format(text: Any) -> dict[str, Any] | None:
    fmt = obj(obj(text).get("format"))
    kind = fmt.get("type")
    if kind in (None, "text"):
        return None
    if kind == "json_object":
        return {"type": "json_object"}
    if kind == "json_schema":
        return {"type": "json_schema", "json_schema": {
            "name": fmt.get("name", "response"), "schema": fmt.get("schema") or {},
            "strict": bool(fmt.get("strict"))}}
    raise Untranslatable(f"text.format of type {kind!r}", ROUTE, "text.format")


@guarded(ROUTE)
def responses_to_chat(body: dict[str, Any]) -> dict[str, Any]:
    """A (validated) Responses body as a chat body for the same model."""
    unknown = sorted(k for k in body if k not in _MAPPED | _IGNORED)
    if unknown:
        raise Untranslatable(", ".join(f"`{k}`" for k in unknown), ROUTE, unknown[0])
    messages = []
    if isinstance(body.get("instructions"), str):
        messages.append({"role": "system", "content": body["instructions"]})
    messages.extend(_input(body.get("input")))
    out: dict[str, Any] = {"model": body["model"], "messages": messages}
    if body.get("max_output_tokens") is not None:
        out["max_tokens"] = body["max_output_tokens"]
    for name in ("temperature", "top_p", "user", "parallel_tool_calls"):
        if body.get(name) is not None:
            out[name] = body[name]
    # the end user's newer name: chat-shaped upstreams know `user`
    if body.get("safety_identifier") is not None and "user" not in out:
        out["user"] = body["safety_identifier"]
    if body.get("tools"):
        out["tools"] = _tools(body["tools"])
        choice = _tool_choice(body.get("tool_choice"))
        if choice is not None:
            out["tool_choice"] = choice
    fmt = _response_format(body.get("text"))
    if fmt is not None:
        out["response_format"] = fmt
    if body.get("stream"):
        out["stream"] = True
        out["stream_options"] = {"include_usage": True}
    return out
