"""What every translation between wire formats shares: the error for a request that has no
faithful equivalent on the route it took, and small readers of JSON values.

A translation never drops what it cannot express: the client gets a 400 naming the field
and the route, so it can change the request or pick a model whose upstream speaks it.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from gateway.domain.openai_errors import OpenAIError, bad_request

P = ParamSpec("P")
R = TypeVar("R")

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


def guarded(route: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """A translation of a client's body: a field of a shape it did not expect (validation
    checks only the fields the gateway acts on) is the client's 400, never a 500."""

    def wrap(translate: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(translate)
        def guarded_translate(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return translate(*args, **kwargs)
            except OpenAIError:
                raise
            except (AttributeError, TypeError, KeyError, IndexError, ValueError):
                raise bad_request(
                    f"The request has a field of an unexpected shape ({route}); check it "
                    "against the API's reference.", code="invalid_request"
                ) from None

        return guarded_translate

    return wrap
