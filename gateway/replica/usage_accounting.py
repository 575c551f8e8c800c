"""From what an upstream said (or did not say) to the tokens a request is charged for.

Pure. Usage reported by the provider wins; without it the tokens are counted offline
and marked estimated; what cannot be counted stays missing, so its cost stays unknown
instead of showing as $0.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from gateway.domain.pricing import TokenUsage
from gateway.domain.token_estimate import count_tokens, estimate_prompt_tokens
from gateway.domain.usage_record import UsageSource


@dataclasses.dataclass(frozen=True, slots=True)
class Accounted:
    usage: TokenUsage | None
    source: UsageSource


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def usage_from_openai(usage: Any) -> TokenUsage | None:
    """OpenAI's usage object, with cached and reasoning tokens from their details."""
    if not isinstance(usage, dict) or not isinstance(usage.get("prompt_tokens"), int):
        return None
    prompt_details = usage.get("prompt_tokens_details")
    completion_details = usage.get("completion_tokens_details")
    prompt = _int(usage.get("prompt_tokens"))
    completion = _int(usage.get("completion_tokens"))
    cached = _int(prompt_details.get("cached_tokens")) if isinstance(prompt_details, dict) else 0
    reasoning = (
        _int(completion_details.get("reasoning_tokens"))
        if isinstance(completion_details, dict)
        else 0
    )
    # the parts are included in the totals; an upstream that says otherwise is clamped
    # rather than trusted with a larger bill
    return TokenUsage(
        prompt_tokens=prompt,
        cached_prompt_tokens=min(cached, prompt),
        completion_tokens=completion,
        reasoning_tokens=min(reasoning, completion),
    )


def completion_text(body: dict[str, Any]) -> str:
    """The generated text of a non-streaming completion (every choice), for estimates."""
    parts: list[str] = []
    for choice in body.get("choices") or ():
        message = choice.get("message") if isinstance(choice, dict) else None
        if not isinstance(message, dict):
            continue
        if isinstance(message.get("content"), str):
            parts.append(message["content"])
        for call in message.get("tool_calls") or ():
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
                parts.append(fn["arguments"])
    return "".join(parts)


def account(
    reported: Any,
    *,
    messages: list[Any] | None,
    completion: str | None,
    model: str | None = None,
) -> Accounted:
    """Reported usage if present, else an estimate from the prompt and the text seen."""
    usage = usage_from_openai(reported)
    if usage is not None:
        return Accounted(usage, UsageSource.PROVIDER)
    if messages is None or completion is None:
        return Accounted(None, UsageSource.MISSING)
    try:
        prompt = estimate_prompt_tokens(messages)
        generated = count_tokens(completion, model)
    except Exception:  # noqa: BLE001 - an estimate that fails leaves the usage missing
        return Accounted(None, UsageSource.MISSING)
    return Accounted(
        TokenUsage(prompt_tokens=prompt, completion_tokens=generated), UsageSource.ESTIMATED
    )
