"""A chat completion request as the simulator understands it, checked like OpenAI would."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MAX_CHOICES = 16


class InvalidRequest(ValueError):
    def __init__(self, message: str, param: str | None = None):
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class ChatRequest:
    model: str
    messages: tuple[dict[str, Any], ...]
    stream: bool = False
    include_usage: bool = False
    n: int = 1
    max_tokens: int | None = None  # the tighter of max_tokens and max_completion_tokens
    tools: tuple[dict[str, Any], ...] = ()
    tool_choice: Any = None
    response_format: dict[str, Any] | None = None
    seed: int | None = None
    service_tier: str | None = None  # as asked (None: the default)
    web_searches: int = 0  # web search calls the hosted tool makes (sim: its cap, up to 4)

    @property
    def json_mode(self) -> bool:
        kind = (self.response_format or {}).get("type")
        return kind in ("json_object", "json_schema")


def _positive_int(body: dict[str, Any], name: str, upper: int | None = None) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidRequest(f"Invalid '{name}': expected an integer >= 1, got {value!r}.", name)
    if upper is not None and value > upper:
        raise InvalidRequest(f"Invalid '{name}': at most {upper}, got {value}.", name)
    return value


def parse_chat_request(body: Any) -> ChatRequest:
    if not isinstance(body, dict):
        raise InvalidRequest("The request body must be a JSON object.")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise InvalidRequest("You must provide a model parameter.", "model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise InvalidRequest("'messages' must be a non-empty array.", "messages")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise InvalidRequest(f"Invalid 'messages[{i}]': expected an object with a role.",
                                 f"messages[{i}]")
    caps = [c for c in (_positive_int(body, "max_tokens"),
                        _positive_int(body, "max_completion_tokens")) if c is not None]
    tools = body.get("tools") or ()
    if not isinstance(tools, list | tuple) or not all(isinstance(t, dict) for t in tools):
        raise InvalidRequest("'tools' must be an array of objects.", "tools")
    response_format = body.get("response_format")
    if response_format is not None and not isinstance(response_format, dict):
        raise InvalidRequest("'response_format' must be an object.", "response_format")
    stream_options = body.get("stream_options")
    stream = body.get("stream") is True
    if stream_options is not None and not stream:
        raise InvalidRequest(
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
            "stream_options",
        )
    return ChatRequest(
        model=model,
        messages=tuple(messages),
        stream=stream,
        include_usage=isinstance(stream_options, dict)
        and stream_options.get("include_usage") is True,
        n=_positive_int(body, "n", MAX_CHOICES) or 1,
        max_tokens=min(caps) if caps else None,
        tools=tuple(tools),
        tool_choice=body.get("tool_choice"),
        response_format=response_format,
        seed=_seed(body),
        service_tier=service_tier(body),
    )


MAX_WEB_SEARCHES = 4


def service_tier(body: dict[str, Any]) -> str | None:
    tier = body.get("service_tier")
    return tier if isinstance(tier, str) else None


def web_searches(tools: Any, cap: Any) -> int:
    """A hosted web search tool searches its cap's times (up to 4), once without a cap;
    no such tool: none."""
    if not isinstance(tools, list) or not any(
        isinstance(t, dict) and str(t.get("type", "")).startswith("web_search") for t in tools
    ):
        return 0
    if isinstance(cap, int) and not isinstance(cap, bool) and cap >= 0:
        return min(cap, MAX_WEB_SEARCHES)
    return 1


def _seed(body: dict[str, Any]) -> int | None:
    seed = body.get("seed")
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise InvalidRequest(f"Invalid 'seed': expected an integer, got {seed!r}.", "seed")
    return seed
