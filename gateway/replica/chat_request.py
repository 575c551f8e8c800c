"""Validation of a client's chat completion request, before anything is routed.

Hand-written rather than a pydantic model of OpenAI's whole schema: the gateway must pass
through parameters it does not know (new OpenAI fields, provider extras), it only needs
the few fields it acts on, and each check gives the client OpenAI's `param` pointer.
Model validation was a tenth of a peer gateway's CPU per request.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from gateway.domain import json_codec
from gateway.domain.openai_errors import OpenAIError, bad_request

_ROLES = {"system", "developer", "user", "assistant", "tool", "function"}
# Deeper than any real request: OpenAI's own bodies nest 6-8 levels (tool schemas more);
# a limit this low keeps every later walk over the body (estimates, re-encoding) cheap.
MAX_JSON_DEPTH = 64
# Control characters and lone surrogates: never part of a name, and they break logs,
# headers and PostgreSQL text (NUL) further down.
_BAD_IDENTIFIER = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff]")
# A lone surrogate can only enter through a `\uD800`-style escape (raw UTF-8 cannot
# encode one), so the bytes are searched first and the body walked only when one shows.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
# OpenAI's own ceiling on `n` (and, here, on `best_of`): each choice is billed output
MAX_CHOICES = 128
# any other count a client sends (token limits, dimensions): what an int32 holds, which
# is what upstreams take; larger is never a real request and only overflows further down
MAX_COUNT = 2**31 - 1


@dataclasses.dataclass(frozen=True, slots=True)
class ChatRequest:
    body: dict[str, Any]  # the client's body, passed on with `model` replaced
    model: str
    stream: bool
    include_usage: bool  # the client asked for the usage chunk of a stream
    max_tokens: int | None
    # how many outputs the provider bills for one prompt: `n`, `best_of` (each choice
    # generated is billed, also those `best_of` throws away)
    outputs: int = 1


def parse_json_body(raw: bytes, max_bytes: int) -> Any:
    if len(raw) > max_bytes:
        raise OpenAIError(
            413,
            f"Request body is {len(raw)} bytes; the limit is {max_bytes} bytes.",
            code="request_too_large",
        )
    if not raw:
        raise bad_request("The request body is empty; send a JSON object.", code="invalid_json")
    try:
        body = json_codec.loads(raw, parse_constant=_no_constant)
    except RecursionError:
        raise _too_deep() from None
    except (ValueError, UnicodeDecodeError) as err:
        raise bad_request(
            f"The request body is not valid JSON: {err}", code="invalid_json"
        ) from None
    if json_depth_exceeds(body, MAX_JSON_DEPTH):
        raise _too_deep()
    if _SURROGATE_ESCAPE.search(raw) and _has_lone_surrogate(body):
        # Python decodes a valid pair to one character, so a surrogate left is a lone one:
        # not text, and UTF-8 (the upstream's wire, PostgreSQL, our logs) cannot carry it
        raise bad_request(
            "The request body holds a lone UTF-16 surrogate (an unpaired \\uD800-\\uDFFF "
            "escape); text must be valid Unicode.",
            code="invalid_json",
        )
    return body


def _has_lone_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            if _SURROGATE.search(node):
                return True
        elif isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def _no_constant(name: str) -> Any:
    # NaN and Infinity are Python's extension, not JSON: no upstream would take them
    raise ValueError(f"{name} is not a JSON value")


def _too_deep() -> OpenAIError:
    return bad_request(
        f"The request body nests JSON deeper than {MAX_JSON_DEPTH} levels.", code="invalid_json"
    )


def json_depth_exceeds(value: Any, limit: int) -> bool:
    """Whether containers nest deeper than `limit`; iterative, and it visits containers
    only (strings and numbers are not pushed), so a large text costs nothing."""
    if not isinstance(value, dict | list):
        return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node
        for child in children:
            if isinstance(child, dict | list):
                if depth + 1 > limit:
                    return True
                stack.append((child, depth + 1))
    return False


def check_identifier(value: str, param: str) -> None:
    """Names (model, user, metadata keys) hold no control characters or lone surrogates."""
    if _BAD_IDENTIFIER.search(value):
        raise bad_request(
            f"`{param}` contains control characters or invalid Unicode.", param=param
        )


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def validate_chat_request(body: Any) -> ChatRequest:
    if not isinstance(body, dict):
        raise bad_request(f"The request body must be a JSON object, not {_type_name(body)}.")
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise bad_request("`model` is required and must be a non-empty string.", param="model")
    check_identifier(model, "model")
    user = body.get("user")
    if user is not None:
        if not isinstance(user, str):
            raise bad_request("`user` must be a string.", param="user")
        check_identifier(user, "user")
    metadata = body.get("metadata")
    if metadata is not None:
        if not isinstance(metadata, dict):
            raise bad_request("`metadata` must be an object.", param="metadata")
        for key in metadata:
            check_identifier(key, "metadata")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad_request("`messages` must be a non-empty array.", param="messages")
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise bad_request(f"messages[{i}] must be an object.", param=f"messages[{i}]")
        role = message.get("role")
        if role not in _ROLES:
            raise bad_request(
                f"messages[{i}].role must be one of {', '.join(sorted(_ROLES))}.",
                param=f"messages[{i}].role",
            )
    stream = body.get("stream", False)
    if stream is not None and not isinstance(stream, bool):
        raise bad_request("`stream` must be a boolean.", param="stream")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise bad_request("`stream_options` must be an object.", param="stream_options")
    include_usage = bool(options and options.get("include_usage") is True)
    max_tokens = _max_tokens(body)
    for name in ("temperature", "top_p"):
        value = body.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise bad_request(f"`{name}` must be a number.", param=name)
    return ChatRequest(
        body=body,
        model=model,
        stream=bool(stream),
        include_usage=include_usage,
        max_tokens=max_tokens,
        outputs=choices(body, "n") or 1,
    )


def choices(body: dict[str, Any], name: str) -> int | None:
    """`n` or `best_of`: an integer from 1 to MAX_CHOICES, or absent (None)."""
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_CHOICES:
        raise bad_request(
            f"`{name}` must be an integer from 1 to {MAX_CHOICES}.", param=name
        )
    return value


def count_field(body: dict[str, Any], name: str) -> int | None:
    """A positive integer count (a token limit...) up to MAX_COUNT, or absent (None)."""
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_COUNT:
        raise bad_request(
            f"`{name}` must be a positive integer of at most {MAX_COUNT}.", param=name
        )
    return value


def _max_tokens(body: dict[str, Any]) -> int | None:
    """The larger of `max_tokens` and `max_completion_tokens`: which one an upstream
    honours when both are sent is its own affair, so the worst case takes the larger."""
    found = None
    for name in ("max_completion_tokens", "max_tokens"):
        value = count_field(body, name)
        if value is not None:
            found = value if found is None else max(found, value)
    return found


def upstream_body(req: ChatRequest, upstream_model: str) -> dict[str, Any]:
    """The body sent upstream: the client's, with the provider's model id, and usage asked
    for on every stream so that no stream is ever logged at $0."""
    body = dict(req.body)
    body["model"] = upstream_model
    if req.stream:
        options = dict(body.get("stream_options") or {})
        options["include_usage"] = True
        body["stream_options"] = options
    return body
