"""A chat completion's conversation held to its models' context windows, before admission.

The policy is the request's `x-costgate-trim` header, else its alias's `trim`, else
`error`. The conversation is fitted to the plan's first model (the one meant to answer);
a fallback is then kept only if that same conversation fits its own window, otherwise it
is skipped: trimming once keeps one prompt for the whole request (what admission reserved
and what the record counts), and a fallback is never handed a request it would refuse.
When the first model cannot take it (policy `error`, or what must be kept is too long),
the request is a 400 `context_length_exceeded` in OpenAI's shape, param `messages`.

Only chat completions are fitted: the Responses API's `input` (items of several kinds,
and `previous_response_id` state the gateway cannot see) and Anthropic's Messages go
upstream as they came, and the upstream's own limit applies.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from gateway.domain.config import Config
from gateway.domain.context_trim import ContextTooLong, TrimPolicy, fit
from gateway.domain.endpoints import Endpoint
from gateway.domain.openai_errors import OpenAIError, bad_request
from gateway.replica.exchange import Exchange
from gateway.routing.policy import RoutePlan

TRIM_HEADER = "x-costgate-trim"


def trim_policy(cfg: Config, requested: str, headers: Mapping[str, str]) -> TrimPolicy:
    raw = headers.get(TRIM_HEADER)
    if raw is not None:
        try:
            return TrimPolicy(raw.strip().lower())
        except ValueError:
            raise bad_request(
                f"{TRIM_HEADER} must be one of {', '.join(p.value for p in TrimPolicy)}.",
                param=TRIM_HEADER,
                code="invalid_header",
            ) from None
    alias = cfg.aliases.get(requested)
    return TrimPolicy(alias.trim) if alias is not None else TrimPolicy.ERROR


def fit_context(
    ex: Exchange, plan: RoutePlan, cfg: Config, headers: Mapping[str, str]
) -> RoutePlan:
    """The plan whose models the (possibly trimmed) conversation fits; `ex.request` is
    replaced by the trimmed one and `ex.trimmed_tokens` set when anything was dropped."""
    req = ex.request
    if ex.endpoint is not Endpoint.CHAT_COMPLETIONS or req is None:
        return plan
    policy = trim_policy(cfg, ex.requested, headers)
    first = cfg.models_by_name[plan.first]
    messages = req.body.get("messages")
    if not isinstance(messages, list):
        return plan
    if first.context_window is not None:  # none known: the upstream's own limit applies
        try:
            trimmed = fit(
                messages,
                window=first.context_window,
                max_tokens=req.max_tokens,
                policy=policy,
                model=first.upstream_model,
            )
        except ContextTooLong as err:
            raise OpenAIError(
                400, str(err), param="messages", code="context_length_exceeded"
            ) from None
        if trimmed.dropped_tokens:
            messages = trimmed.messages
            ex.request = dataclasses.replace(req, body={**req.body, "messages": messages})
            ex.trimmed_tokens = trimmed.dropped_tokens
    output = req.max_tokens or 0
    models = tuple(
        name
        for name in plan.models
        if name == plan.first or _fits(cfg, name, messages, output)
    )
    return plan if models == plan.models else dataclasses.replace(plan, models=models)


def _fits(cfg: Config, name: str, messages: list[Any], output: int) -> bool:
    model = cfg.models_by_name[name]
    if model.context_window is None:
        return True
    try:
        fit(
            messages,
            window=model.context_window,
            max_tokens=output,
            policy=TrimPolicy.ERROR,
            model=model.upstream_model,
        )
    except ContextTooLong:
        return False
    return True
