"""A conversation held to its models' context windows, before admission.

The policy is the request's `x-costgate-trim` header, else its alias's `trim`, else
`error`. The conversation is fitted to the plan's first model (the one meant to answer);
a fallback is then kept only if that same conversation fits its own window, otherwise it
is skipped: trimming once keeps one prompt for the whole request (what admission reserved
and what the record counts), and a fallback is never handed a request it would refuse.
When the first model cannot take it (policy `error`, or what must be kept is too long),
the request is a 400 `context_length_exceeded` in OpenAI's shape, param `messages`
(`input` on the Responses API).

Chat completions' `messages` and the Responses API's `input` items (with `instructions`
counted and always kept; a function call goes with its output) and Anthropic's Messages
(`system` always kept; trimmed in user/assistant pairs, so the turns still open on the
user's and alternate; a `tool_use` turn goes with its `tool_result` turn) are fitted.
Not covered: a Responses request that continues a stored one (`previous_response_id`,
`conversation`: the gateway cannot see that context) has only what it sends checked;
legacy completions and embeddings go as they came (the upstream's own limit applies).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
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


@dataclasses.dataclass(frozen=True, slots=True)
class Conversation:
    """A request's input as chat messages to count and trim, and how to rebuild the body
    from the indexes kept."""

    messages: list[Any]
    rebuild: Callable[[tuple[int, ...]], dict[str, Any]]
    param: str  # what a 400 names
    turn_pairs: bool = False  # Anthropic's turns: trimmed in user/assistant pairs


def conversation(endpoint: Endpoint, body: dict[str, Any]) -> Conversation | None:
    if endpoint is Endpoint.CHAT_COMPLETIONS:
        messages = body.get("messages")
        if not isinstance(messages, list):
            return None
        return Conversation(
            messages, lambda kept: {**body, "messages": [messages[i] for i in kept]}, "messages"
        )
    if endpoint is Endpoint.MESSAGES:
        return _anthropic(body)
    if endpoint is not Endpoint.RESPONSES or body.get("input") is None:
        return None  # other APIs; a stored conversation's input is the upstream's to count
    given = body["input"]
    instructions = body.get("instructions")
    head = [{"role": "system", "content": instructions}] if isinstance(instructions, str) else []
    items = given if isinstance(given, list) else [{"role": "user", "content": given}]
    offset = len(head)
    return Conversation(
        head + [_as_message(item) for item in items],
        lambda kept: {**body, "input": [items[i - offset] for i in kept if i >= offset]},
        "input",
    )


def _anthropic(body: dict[str, Any]) -> Conversation | None:
    """A Messages body's turns, counted as `estimate_messages` counts them (the system
    prompt always kept): an assistant turn with `tool_use` blocks as tool calls, a user
    turn carrying `tool_result` blocks as their results."""
    turns = body.get("messages")
    if not isinstance(turns, list):
        return None
    system = body.get("system")
    head = [{"role": "system", "content": json.dumps(system)}] if system else []
    pseudo: list[Any] = []
    for turn in turns:
        content = turn.get("content") if isinstance(turn, dict) else turn
        role = str(turn.get("role", "user")) if isinstance(turn, dict) else "user"
        blocks = {b.get("type") for b in content if isinstance(b, dict)} if isinstance(
            content, list) else set()
        text = content if isinstance(content, str) else json.dumps(content)
        if role == "assistant" and "tool_use" in blocks:
            pseudo.append({"role": role, "content": text, "tool_calls": True})
        else:
            pseudo.append({"role": "tool" if "tool_result" in blocks else role, "content": text})
    offset = len(head)
    return Conversation(
        head + pseudo,
        lambda kept: {**body, "messages": [turns[i - offset] for i in kept if i >= offset]},
        "messages",
        turn_pairs=True,
    )


def _as_message(item: Any) -> dict[str, Any]:
    """A Responses input item as the chat message that counts and trims like it: calls
    (`function_call`, `custom_tool_call`...) as an assistant's tool calls, their outputs as
    tool results, reasoning as what goes with the item after it."""
    if not isinstance(item, dict):
        return {"role": "user", "content": item}
    kind = str(item.get("type") or "message")
    if item.get("role") is not None:
        return {"role": item["role"], "content": item.get("content")}
    if kind == "reasoning":
        return {"role": "reasoning", "content": item.get("summary") or item.get("content")}
    if kind.endswith("_call_output"):
        return {"role": "tool", "content": item.get("output")}
    if kind.endswith("_call"):
        call = item.get("arguments") or item.get("input") or item.get("action") or kind
        return {"role": "assistant", "content": None, "tool_calls": call}
    return {"role": kind, "content": item}  # an item_reference and the like: on its own


def fit_context(
    ex: Exchange, plan: RoutePlan, cfg: Config, headers: Mapping[str, str]
) -> RoutePlan:
    """The plan whose models the (possibly trimmed) conversation fits; `ex.request` is
    replaced by the trimmed one and `ex.trimmed_tokens` set when anything was dropped."""
    req = ex.request
    conv = None if req is None else conversation(ex.endpoint, req.body)
    if req is None or conv is None:
        return plan
    policy = trim_policy(cfg, ex.requested, headers)
    first = cfg.models_by_name[plan.first]
    messages = conv.messages
    if first.context_window is not None:  # none known: the upstream's own limit applies
        try:
            trimmed = fit(
                messages,
                window=first.context_window,
                max_tokens=req.max_tokens,
                policy=policy,
                model=first.upstream_model,
                turn_pairs=conv.turn_pairs,
            )
        except ContextTooLong as err:
            raise OpenAIError(
                400, str(err), param=conv.param, code="context_length_exceeded"
            ) from None
        if trimmed.dropped_tokens:
            messages = trimmed.messages
            ex.request = dataclasses.replace(req, body=conv.rebuild(trimmed.kept))
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
