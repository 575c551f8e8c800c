"""What the simulator answers and how slowly: a pure plan, made before anything is sent.

The plan fixes the latencies (with jitter), each choice's pieces (one token each, so the
usage figures are the length of what is sent), tool calls and the usage object.
"""

from __future__ import annotations

import json
import random
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from gateway.devtools.sim.request import ChatRequest
from gateway.devtools.sim.settings import REFUSAL_TEXT, Behaviour
from gateway.devtools.sim.tokens import (
    REPLY_PRIMING_TOKENS,
    corpus,
    count_text,
    message_tokens,
    tokenize_pieces,
    tools_tokens,
)

CACHE_INCREMENT = 128  # OpenAI reports cached prompt tokens in steps of 128


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class PlannedChoice:
    index: int
    # token-sized pieces of the content, or of the tool call's arguments
    pieces: tuple[str, ...]
    pieces_json: tuple[str, ...]
    tool_call: ToolCall | None
    finish_reason: str
    completion_tokens: int
    reasoning_tokens: int
    refusal: str | None = None  # the model declined: no content, this text instead

    @property
    def content(self) -> str | None:
        return None if self.tool_call or self.refusal else "".join(self.pieces)


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0
    reasoning_tokens: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": self.cached_tokens, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": self.reasoning_tokens,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }


@dataclass(frozen=True)
class ReplyPlan:
    choices: tuple[PlannedChoice, ...]
    usage: Usage
    ttft_s: float  # until the first content token (reasoning time included)
    per_token_s: float
    service_tier: str = "default"  # the tier it answers it served at (OpenAI's names)
    web_searches: int = 0  # hosted web search calls it reports

    @property
    def anthropic_tier(self) -> str:
        """The tier in Anthropic's names: `standard` unless another was asked for."""
        return "standard" if self.service_tier == "default" else self.service_tier

    @property
    def longest(self) -> int:
        return max((len(c.pieces) for c in self.choices), default=0)

    @property
    def duration_s(self) -> float:
        return self.ttft_s + max(self.longest - 1, 0) * self.per_token_s


class PromptCache:
    """Remembers prompt prefixes (message by message) to report cached prompt tokens.

    Like OpenAI's prompt caching: a prefix counts once it was seen before and is at least
    `min_tokens` long, rounded down to 128 tokens. Bounded, least recently used first out.
    """

    def __init__(self, min_tokens: int = 1024, capacity: int = 20_000):
        self.min_tokens = min_tokens
        self.capacity = capacity
        self._seen: OrderedDict[int, None] = OrderedDict()

    def clear(self) -> None:
        self._seen.clear()

    def cached_tokens(self, model: str, messages: tuple[dict[str, Any], ...],
                      counts: list[int]) -> int:
        key = hash(model)
        prefix_tokens = 0
        cached = 0
        for message, tokens in zip(messages, counts, strict=True):
            key = hash((key, message.get("role"), repr(message.get("content"))))
            prefix_tokens += tokens
            if prefix_tokens >= self.min_tokens and key in self._seen:
                self._seen.move_to_end(key)
                cached = prefix_tokens
            else:
                self._seen[key] = None
        while len(self._seen) > self.capacity:
            self._seen.popitem(last=False)
        return cached // CACHE_INCREMENT * CACHE_INCREMENT


def _jittered(value: float, jitter: float, rng: random.Random) -> float:
    return value * (1 + rng.uniform(-jitter, jitter)) if jitter and value else value


def _example_value(schema: Any, rng: random.Random) -> Any:
    """A value that satisfies the simple JSON schemas tools and response formats use."""
    if not isinstance(schema, dict):
        return "value"
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        return {name: _example_value(sub, rng) for name, sub in props.items()}
    if kind == "array":
        return [_example_value(schema.get("items"), rng)]
    if kind == "integer":
        return rng.randint(1, 100)
    if kind == "number":
        return round(rng.uniform(1, 100), 2)
    if kind == "boolean":
        return True
    return corpus().text(rng.randrange(corpus().size), 3).strip()


def _chosen_tool(request: ChatRequest) -> dict[str, Any] | None:
    functions = [t.get("function") or {} for t in request.tools if t.get("type") == "function"]
    functions = [f for f in functions if isinstance(f.get("name"), str)]
    choice = request.tool_choice
    if not functions or choice == "none":
        return None
    if isinstance(choice, dict):
        wanted = (choice.get("function") or {}).get("name")
        return next((f for f in functions if f["name"] == wanted), functions[0])
    if choice == "required":
        return functions[0]
    # "auto": call a tool unless the conversation just got a tool's result back
    return None if request.messages[-1].get("role") == "tool" else functions[0]


def prompt_token_counts(request: ChatRequest) -> list[int]:
    return [message_tokens(m) for m in request.messages]


def plan_reply(request: ChatRequest, behaviour: Behaviour, rng: random.Random,
               prompt_cache: PromptCache | None = None, spoil: str | None = None) -> ReplyPlan:
    """`spoil`: one of the quality faults (`settings.QUALITY_FAULTS`) to answer with."""
    counts = prompt_token_counts(request)
    prompt_tokens = sum(counts) + REPLY_PRIMING_TOKENS + tools_tokens(request.tools)
    cached = prompt_cache.cached_tokens(request.model, request.messages, counts) \
        if prompt_cache else 0
    per_token_s = _jittered(behaviour.per_token_ms, behaviour.jitter, rng) / 1000
    tool = _chosen_tool(request)
    text = corpus()
    choices = []
    for index in range(request.n):
        reasoning = rng.randint(*behaviour.reasoning_tokens)
        wanted = rng.randint(*behaviour.completion_tokens)
        cap = request.max_tokens
        if cap is not None:
            reasoning = min(reasoning, cap)
        room = wanted if cap is None else min(wanted, cap - reasoning)
        tool_call = None
        if tool is not None:
            value = _example_value(tool.get("parameters"), rng)
            # parses, but an array where the schema wants an object
            arguments = json.dumps([value] if spoil == "bad_tool_args" else value)
            tool_call = ToolCall(f"call_{rng.getrandbits(96):024x}", tool["name"], arguments)
            pieces = tokenize_pieces(arguments)
            pieces_json = tuple(json.dumps(p) for p in pieces)
            visible = len(pieces) + count_text(tool["name"])
            finish = "tool_calls"
        elif request.json_mode:
            words = text.text(rng.randrange(text.size), max(room - 6, 1))
            answer = json.dumps({"answer": words.strip()})
            pieces = tokenize_pieces(answer[:-2] if spoil == "bad_json" else answer)
            finish = "stop"
            if cap is not None and len(pieces) > room:
                # cut like OpenAI does: at the limit, even in the middle of the JSON
                pieces, finish = pieces[:room], "length"
            pieces_json = tuple(json.dumps(p) for p in pieces)
            visible = len(pieces)
        else:
            pieces, pieces_json = text.run(rng.randrange(text.size), room)
            visible = room
            finish = "length" if room < wanted else "stop"
        if spoil == "truncate" and tool is None and len(pieces) > 1:
            pieces, finish = pieces[: len(pieces) // 2], "length"
            pieces_json, visible = tuple(json.dumps(p) for p in pieces), len(pieces)
        refusal = REFUSAL_TEXT if spoil == "refusal" and tool is None else None
        choices.append(PlannedChoice(index, pieces, pieces_json, tool_call, finish,
                                     visible + reasoning, reasoning, refusal))
    reasoning_total = sum(c.reasoning_tokens for c in choices)
    usage = Usage(prompt_tokens, sum(c.completion_tokens for c in choices), cached,
                  reasoning_total)
    # hidden reasoning happens before the first visible token
    ttft_s = _jittered(behaviour.ttft_ms, behaviour.jitter, rng) / 1000 + \
        max((c.reasoning_tokens for c in choices), default=0) * per_token_s
    # the tier asked for is the tier served ("auto" and Anthropic's standard ones: default)
    tier = request.service_tier
    served = "default" if tier in (None, "auto", "standard_only", "standard") else str(tier)
    return ReplyPlan(tuple(choices), usage, ttft_s, per_token_s, served, request.web_searches)
