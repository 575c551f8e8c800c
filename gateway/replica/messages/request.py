"""Validation of a client's Messages request, before anything is routed.

Like `gateway.replica.chat_request`: only the fields the gateway acts on are checked,
each with the field's path, and everything else passes on (to a native Anthropic
upstream as it came; a translation refuses what it cannot carry). The result is the
request path's `ChatRequest`, whose body is the Messages body.
"""

from __future__ import annotations

from typing import Any

from gateway.domain.openai_errors import bad_request
from gateway.replica.chat_request import MAX_COUNT, ChatRequest, check_identifier

_ROLES = ("user", "assistant")


def _content_ok(content: Any) -> bool:
    if isinstance(content, str):
        return True
    return isinstance(content, list) and all(
        isinstance(b, dict) and isinstance(b.get("type"), str) for b in content
    )


def validate_messages_request(body: Any) -> ChatRequest:
    if not isinstance(body, dict):
        raise bad_request("The request body must be a JSON object.")
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise bad_request("model: Field required (a non-empty string).", param="model")
    check_identifier(model, "model")
    max_tokens = body.get("max_tokens")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or not (
        1 <= max_tokens <= MAX_COUNT
    ):
        raise bad_request("max_tokens: Field required (a positive integer).", param="max_tokens")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad_request("messages: must be a non-empty list.", param="messages")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in _ROLES:
            raise bad_request(f"messages.{i}.role: must be 'user' or 'assistant'.",
                              param=f"messages.{i}.role")
        if not _content_ok(message.get("content")):
            raise bad_request(f"messages.{i}.content: must be a string or a list of blocks.",
                              param=f"messages.{i}.content")
    system = body.get("system")
    if system is not None and not _content_ok(system):
        raise bad_request("system: must be a string or a list of text blocks.", param="system")
    stream = body.get("stream", False)
    if stream is not None and not isinstance(stream, bool):
        raise bad_request("stream: must be a boolean.", param="stream")
    for name in ("tools", "stop_sequences"):
        if body.get(name) is not None and not isinstance(body[name], list):
            raise bad_request(f"{name}: must be a list.", param=name)
    metadata = body.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise bad_request("metadata: must be an object.", param="metadata")
    for name in ("temperature", "top_p"):
        value = body.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise bad_request(f"{name}: must be a number.", param=name)
    return ChatRequest(body=body, model=model, stream=bool(stream), include_usage=True,
                       max_tokens=max_tokens)
