"""Fitting a chat conversation into a model's context window, by the policy the app chose.

Pure: messages in, messages out, counted with the offline tokenizer
(`gateway.domain.token_estimate`). The window must hold the prompt and the output the
request allows (`max_tokens`), as the providers count it.

- `error` (the default): nothing is dropped; a prompt that does not fit is refused.
- `drop_oldest`: whole turns are dropped from the oldest on.
- `middle_out`: turns are dropped from the middle outwards, keeping the conversation's
  start (its setting) and its end (the latest context) the longest.

Both trimming policies keep every system/developer message and the last user turn (the last
user message and all after it: an agent's tool calls and results on that turn). An
assistant message with `tool_calls` and the `tool` messages that answer it are one unit:
a provider refuses a tool result without its call, or a call without its results. The
result is never an empty list; when the kept part alone is too long, `ContextTooLong`.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Sequence
from typing import Any

from gateway.domain.token_estimate import (
    REPLY_PRIMING_TOKENS,
    TOKENS_PER_MESSAGE,
    TOKENS_PER_NAME,
    estimate_prompt_tokens,
)

PINNED_ROLES = frozenset({"system", "developer"})
# answers to an assistant's call: `tool` (tool_calls) and the legacy `function` (function_call)
RESULT_ROLES = frozenset({"tool", "function"})


class TrimPolicy(enum.StrEnum):
    ERROR = "error"
    DROP_OLDEST = "drop_oldest"
    MIDDLE_OUT = "middle_out"


@dataclasses.dataclass(frozen=True, slots=True)
class Trimmed:
    messages: list[Any]
    prompt_tokens: int | None  # the estimate of what is sent (None: not counted, far inside)
    dropped_tokens: int  # 0: sent as the client wrote it
    dropped_messages: int = 0
    kept: tuple[int, ...] = ()  # the indexes of `messages` in what is sent


class ContextTooLong(Exception):  # noqa: N818 - named for the OpenAI error it becomes
    def __init__(self, prompt_tokens: int, max_tokens: int, window: int) -> None:
        self.prompt_tokens, self.max_tokens, self.window = prompt_tokens, max_tokens, window
        asked = f" and {max_tokens} tokens of output" if max_tokens else ""
        super().__init__(
            f"This model's maximum context length is {window} tokens. However, you requested "
            f"{prompt_tokens + max_tokens} tokens ({prompt_tokens} in the messages{asked}). "
            "Please reduce the length of the messages or the output tokens, or choose a "
            "trimming policy (x-costgate-trim: drop_oldest | middle_out)."
        )


def upper_bound(messages: Sequence[Any]) -> int:
    """At least the estimate, without tokenizing: no token of the encodings is shorter than
    one byte, and a message's JSON holds every text the estimate counts (plus its framing
    and a name's extra token)."""
    framing = TOKENS_PER_MESSAGE + TOKENS_PER_NAME
    return REPLY_PRIMING_TOKENS + sum(
        framing + len(json.dumps(m, ensure_ascii=False, default=str).encode()) for m in messages
    )


def message_tokens(message: Any, model: str | None = None) -> int:
    """One message's share of the prompt estimate (its framing and content)."""
    if not isinstance(message, dict):
        return estimate_prompt_tokens([{"content": message}], model) - REPLY_PRIMING_TOKENS
    return estimate_prompt_tokens([message], model) - REPLY_PRIMING_TOKENS


def units(messages: Sequence[Any], *, turn_pairs: bool = False) -> list[list[int]]:
    """Indexes of `messages` grouped into what is dropped together: a message alone, or a
    run of tool use (an assistant's tool/function calls, the results that follow, further
    calls on them); a `reasoning` item (the Responses API's) goes with what follows it.
    `turn_pairs` (Anthropic's Messages, whose turns must start with the user's and
    alternate): an assistant's unit joins the one before it, so each unit opens on a user
    turn and dropping whole units keeps the order of roles."""
    groups = _runs(messages)
    if not turn_pairs:
        return groups
    paired: list[list[int]] = []
    for group in groups:
        if paired and _role(messages[group[0]]) == "assistant":
            paired[-1].extend(group)
        else:
            paired.append(group)
    return paired


def _runs(messages: Sequence[Any]) -> list[list[int]]:
    groups: list[list[int]] = []
    tool_run = False  # the last group holds a call: results and further calls join it
    for i, message in enumerate(messages):
        role = _role(message)
        after_reasoning = bool(groups) and _role(messages[groups[-1][-1]]) == "reasoning"
        joins_run = tool_run and (role in RESULT_ROLES or role == "reasoning" or _opens_call(
            message))
        if after_reasoning or joins_run:
            groups[-1].append(i)
            tool_run = tool_run or _opens_call(message)
        else:
            groups.append([i])
            tool_run = _opens_call(message)
    return groups


def _role(message: Any) -> Any:
    return message.get("role") if isinstance(message, dict) else None


def _opens_call(message: Any) -> bool:
    return (
        isinstance(message, dict)
        and message.get("role") == "assistant"
        and bool(message.get("tool_calls") or message.get("function_call"))
    )


def _pinned(messages: Sequence[Any], groups: list[list[int]]) -> set[int]:
    """The groups kept whatever the policy: system/developer prompts, the last user turn
    (the last group if no message is the user's)."""
    roles = [m.get("role") if isinstance(m, dict) else None for m in messages]
    last_user = max((i for i, r in enumerate(roles) if r == "user"), default=None)
    pinned: set[int] = set()
    for g, group in enumerate(groups):
        in_last_turn = last_user is not None and group[-1] >= last_user
        if in_last_turn or roles[group[0]] in PINNED_ROLES:
            pinned.add(g)
    if last_user is None:
        pinned.add(len(groups) - 1)
    return pinned


def _drop_order(droppable: list[int], policy: TrimPolicy) -> list[int]:
    if policy is TrimPolicy.DROP_OLDEST:
        return droppable
    # middle out: nearest the middle first; of two as near, the older one
    middle = (len(droppable) - 1) / 2
    order = sorted(enumerate(droppable), key=lambda pos_g: (abs(pos_g[0] - middle), pos_g[0]))
    return [g for _, g in order]


def fit(
    messages: Sequence[Any],
    *,
    window: int,
    max_tokens: int | None,
    policy: TrimPolicy,
    model: str | None = None,
    turn_pairs: bool = False,
) -> Trimmed:
    """`messages` as they fit `window` with room for `max_tokens` of output, or
    `ContextTooLong` when the policy cannot make them fit."""
    output = max_tokens or 0
    if upper_bound(messages) + output <= window:
        # surely inside: no need to tokenize (most requests, against windows of 128k+)
        return Trimmed(list(messages), None, 0, 0, tuple(range(len(messages))))
    costs = [message_tokens(m, model) for m in messages]
    total = REPLY_PRIMING_TOKENS + sum(costs)
    if total + output <= window:
        return Trimmed(list(messages), total, 0, 0, tuple(range(len(messages))))
    if policy is TrimPolicy.ERROR or not messages:
        raise ContextTooLong(total, output, window)
    groups = units(messages, turn_pairs=turn_pairs)
    pinned = _pinned(messages, groups)
    droppable = [g for g in range(len(groups)) if g not in pinned]
    dropped: set[int] = set()
    kept = total
    for g in _drop_order(droppable, policy):
        if kept + output <= window:
            break
        dropped.add(g)
        kept -= sum(costs[i] for i in groups[g])
    if kept + output > window:
        raise ContextTooLong(kept, output, window)
    keep = [i for g, group in enumerate(groups) if g not in dropped for i in group]
    return Trimmed(
        [messages[i] for i in keep], kept, total - kept, len(messages) - len(keep), tuple(keep)
    )
