"""From what an upstream said (or did not say) to the tokens a request is charged for.

Pure. Usage reported by the provider (in our token classes: each adapter reads its own
wire format's usage) wins; without it the tokens are counted offline
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


def account(
    reported: TokenUsage | None,
    *,
    messages: list[Any] | None,
    completion: str | None,
    model: str | None = None,
) -> Accounted:
    """Reported usage (read by the provider's adapter) if present, else an estimate from
    the prompt and the text seen."""
    if reported is not None:
        return Accounted(reported, UsageSource.PROVIDER)
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



def with_failed_attempts(
    accounted: Accounted, messages: list[Any] | None, failures: int, model: str | None = None
) -> Accounted:
    """What a request is charged once `failures` of its attempts failed in a way the
    provider may still bill (timeouts, broken connections, its 5xx): each one's prompt,
    estimated, on top of what the attempt that ended it used (none, for a request that
    failed). Marked estimated; left as it was when the prompt cannot be counted."""
    if failures <= 0:
        return accounted
    one = account(None, messages=messages, completion="", model=model)
    if one.usage is None:
        return accounted
    extra = one.usage.prompt_tokens * failures
    base = accounted.usage or TokenUsage()
    return Accounted(
        dataclasses.replace(base, prompt_tokens=base.prompt_tokens + extra),
        UsageSource.ESTIMATED,
    )
