"""What every translation between wire formats shares: the error for a request that has no
faithful equivalent on the route it took, and small readers of JSON values.

A translation never drops what it cannot express: the client gets a 400 naming the field
and the route, so it can change the request or pick a model whose upstream speaks it.
"""

from __future__ import annotations

import json
from typing import Any

from gateway.domain.openai_errors import OpenAIError

JSON_SEPARATORS = (",", ":")


class Untranslatable(OpenAIError):
    """A request field that the route's upstream format cannot carry faithfully."""

    def __init__(self, what: str, route: str, param: str | None = None) -> None:
        super().__init__(
            400,
            f"{what} is not supported on this route ({route}); "
            "send it to a model whose upstream speaks it natively.",
            param=param,
            code="unsupported_on_route",
        )


def dumps(value: Any) -> str:
    return json.dumps(value, separators=JSON_SEPARATORS)


def count(value: Any) -> int:
    """A token count as reported: a non-negative int, anything else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def parse_arguments(arguments: Any) -> dict[str, Any]:
    """OpenAI's tool-call arguments (a JSON string) as the object Anthropic and Gemini
    want; a model's arguments that are not an object are kept under one key, not lost."""
    if isinstance(arguments, dict):
        return arguments
    if not isinstance(arguments, str) or not arguments.strip():
        return {}
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return {"arguments": arguments}
    return parsed if isinstance(parsed, dict) else {"arguments": parsed}


def unknown_fields(body: dict[str, Any], known: frozenset[str]) -> list[str]:
    return sorted(k for k in body if k not in known)


def obj(value: Any) -> dict[str, Any]:
    """A JSON object, or an empty one for anything else (a reader never trusts a shape)."""
    return value if isinstance(value, dict) else {}
