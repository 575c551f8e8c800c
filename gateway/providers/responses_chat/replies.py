"""A chat completion as a Response object, and our usage as the Responses usage. Pure.

Responses' `input_tokens` include the cached ones (like chat's `prompt_tokens`), its
`output_tokens` the reasoning ones.
"""

from __future__ import annotations

import time
from typing import Any

from gateway.domain.pricing import TokenUsage
from gateway.providers.translation import obj


def responses_usage(usage: TokenUsage | None) -> dict[str, Any] | None:
    if usage is None:
        return None
    return {
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_prompt_tokens},
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
    }


def message_item(item_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    return {"type": "message", "id": item_id, "status": status, "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def call_item(item_id: str, call_id: str, name: str, arguments: str,
              status: str = "completed") -> dict[str, Any]:
    return {"type": "function_call", "id": item_id, "call_id": call_id, "name": name,
            "arguments": arguments, "status": status}


def response_object(response_id: str, model: str, output: list[dict[str, Any]],
                    usage: TokenUsage | None, finish: str | None,
                    created: int | None = None) -> dict[str, Any]:
    """A Response; `finish` None: still in progress; "length": incomplete."""
    status = "in_progress" if finish is None else \
        "incomplete" if finish == "length" else "completed"
    return {
        "id": response_id, "object": "response", "created_at": created or int(time.time()),
        "status": status, "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete"
        else None,
        "instructions": None, "model": model, "output": output, "parallel_tool_calls": True,
        "tool_choice": "auto", "tools": [], "usage": responses_usage(usage),
    }


def response_id(upstream_id: str) -> str:
    return upstream_id if upstream_id.startswith("resp_") else f"resp_{upstream_id}"


def completion_to_response(completion: dict[str, Any], usage: TokenUsage | None) -> dict[str, Any]:
    """The first choice of a chat completion as a Response (Responses has no `n`)."""
    choices = completion.get("choices") or [{}]
    choice = obj(choices[0])
    message = obj(choice.get("message"))
    rid = response_id(str(completion.get("id", "")))
    output: list[dict[str, Any]] = []
    if isinstance(message.get("content"), str) and message["content"]:
        output.append(message_item(f"msg_{rid[5:]}", message["content"]))
    for i, call in enumerate(message.get("tool_calls") or ()):
        fn = obj(obj(call).get("function"))
        output.append(call_item(f"fc_{rid[5:]}_{i}", str(obj(call).get("id", "")),
                                str(fn.get("name", "")), str(fn.get("arguments", ""))))
    return response_object(rid, str(completion.get("model", "")), output, usage,
                           str(choice.get("finish_reason") or "stop"))
