"""Errors as Anthropic's API gives them: `{"type": "error", "error": {"type", "message"}}`.

The request path raises `OpenAIError` everywhere; `/v1/messages` answers in Anthropic's
shape with the same status, so Anthropic's SDKs raise the class they would raise against
Anthropic itself. An upstream Anthropic error passed on keeps its own type.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi.responses import Response

from gateway.domain.openai_errors import OpenAIError

_BY_STATUS = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "request_too_large",
    415: "invalid_request_error",
    429: "rate_limit_error",
    503: "overloaded_error",
    529: "overloaded_error",
}
_ANTHROPIC_TYPES = frozenset({*_BY_STATUS.values(), "api_error", "timeout_error"})


def error_type(err: OpenAIError) -> str:
    if err.type in _ANTHROPIC_TYPES and err.type != "invalid_request_error":
        return err.type  # an Anthropic upstream's own, passed on
    return _BY_STATUS.get(err.status, "api_error")


def error_body(err: OpenAIError) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type(err), "message": err.message}}


def error_response(err: OpenAIError, headers: dict[str, str] | None = None) -> Response:
    return Response(
        json.dumps(error_body(err)).encode(),
        status_code=err.status,
        headers=(headers or {}) | err.headers,
        media_type="application/json",
    )


def stream_error_event(message: str, kind: str = "api_error") -> dict[str, Any]:
    """How Anthropic ends a stream that already started: an `error` event."""
    return {"type": "error", "error": {"type": kind, "message": message}}
