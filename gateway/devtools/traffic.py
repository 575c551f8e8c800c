"""The demo's traffic: apps calling the gateway with the official openai SDK, bounded.

A realistic mix: short questions, paragraphs and long documents (whose shared system
prompt the upstream reports as cached tokens), every alias and some concrete models,
streams (half of them asking for usage, a few abandoned midway), now and then a tool
or a priority header, spread over several apps' keys. Most calls are chat completions;
the rest use every other API the gateway serves: Responses, legacy completions,
embeddings (on the embedding models) and Anthropic's Messages (with the anthropic SDK).
Each app's calls carry its customers, sessions and features
(gateway.devtools.traffic_audience), so the Customers page has a real distribution, and
legacy completions go only to the models that serve them (no request fails by design).
Bounded by a count and a time, and stopped by an event (asyncio.Event or
threading.Event: anything with is_set()).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import anthropic
import openai
from openai.types.chat import (
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageParam,
    ChatCompletionStreamOptionsParam,
)

from gateway.devtools.traffic_audience import NO_VISIT, Audience, Visit
from gateway.domain.config import Config
from gateway.domain.endpoints import KIND_ENDPOINTS, Endpoint
from gateway.providers.registry import adapter_for, endpoints_of

log = logging.getLogger("costgate.traffic")

DEFAULT_ALIASES = ("auto", "fast", "balanced", "budget", "code")
SHORT_PROMPTS = (
    "What is the capital of Australia?",
    "Give me three names for a coffee shop.",
    "Translate 'good morning' into Spanish.",
    "Is 1013 a prime number?",
    "Write a haiku about invoices.",
    "What does HTTP 429 mean?",
)
PARAGRAPH = (
    "Our team runs a customer support desk for a mid-sized online shop. Tickets arrive by "
    "email and chat, mostly about delivery delays, refunds and sizing. We want to draft "
    "replies automatically, keep a friendly tone, and escalate anything about payments. "
)
# a long shared system prompt: the upstream caches it after the first request
HANDBOOK = " ".join(
    f"Section {i}: agents must verify the order number, restate the customer's problem, "
    f"offer the standard remedy for category {i % 7}, and log the outcome in the CRM."
    for i in range(1, 90)
)
LOOKUP_TOOL: ChatCompletionFunctionToolParam = {"type": "function", "function": {
    "name": "lookup_order",
    "description": "Find an order by its number",
    "parameters": {"type": "object", "required": ["order_id"],
                   "properties": {"order_id": {"type": "string"}}},
}}


# the share of calls on each API (chat takes the rest)
ENDPOINT_SHARES = (("responses", 0.15), ("completions", 0.07), ("embeddings", 0.08),
                   ("messages", 0.07))


class StopSignal(Protocol):
    def is_set(self) -> bool: ...


@dataclass
class TrafficSummary:
    sent: int = 0
    ok: int = 0
    cancelled: int = 0  # streams the client abandoned on purpose
    errors: Counter[str] = field(default_factory=Counter)
    models: Counter[str] = field(default_factory=Counter)
    kinds: Counter[str] = field(default_factory=Counter)  # short, paragraph, long
    endpoints: Counter[str] = field(default_factory=Counter)  # the API each call used
    streams: int = 0
    audience: Audience | None = None  # who the calls were for
    started: float = field(default_factory=time.monotonic)

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self.started

    def line(self) -> str:
        rate = self.sent / self.elapsed_s if self.elapsed_s > 0 else 0.0
        errors = sum(self.errors.values())
        worst = ", ".join(f"{k} x{n}" for k, n in self.errors.most_common(3))
        top = ", ".join(f"{m} {n}" for m, n in self.models.most_common(6))
        apis = ", ".join(f"{e} {n}" for e, n in self.endpoints.most_common())
        return (f"traffic: {self.sent} sent, {self.ok} ok, {errors} errors"
                f"{f' ({worst})' if worst else ''}, {self.streams} streams, "
                f"{rate:.1f} req/s; {top}; {apis}"
                f"{f'; {self.audience.tally()}' if self.audience else ''}")


def default_models(config: Config | None) -> list[str]:
    """Every alias, plus the concrete models of the configuration (or the usual aliases)."""
    if config is None:
        return list(DEFAULT_ALIASES)
    return list(config.aliases) + [m.name for m in config.models if m.kind == "chat"]


def embedding_models(config: Config | None) -> list[str]:
    """The configuration's embedding models (none without one: no embeddings are sent)."""
    return [] if config is None else [m.name for m in config.models if m.kind == "embedding"]


def completion_models(config: Config) -> set[str]:
    """The names serving legacy completions (any other is a 400 there): the chat models
    whose provider speaks it, and the aliases with such a candidate (routed to those)."""
    serving = {m.name for m in config.models
               if Endpoint.COMPLETIONS in KIND_ENDPOINTS[m.kind]
               & endpoints_of(adapter_for(config.provider(m.provider)))}
    return serving | {name for name, alias in config.aliases.items()
                      if serving.intersection(alias.candidates)}


@dataclass(frozen=True)
class PlannedCall:
    model: str
    key_index: int
    kind: str
    messages: list[ChatCompletionMessageParam]
    stream: bool
    include_usage: bool
    abandon_after: int | None  # chunks read before the client walks away
    max_tokens: int | None
    tools: list[ChatCompletionFunctionToolParam] | None
    priority: str | None
    endpoint: str = "chat.completions"
    visit: Visit = NO_VISIT  # its end user, session and tags


def _endpoint(rng: random.Random, embedders: Sequence[str]) -> str:
    roll, floor = rng.random(), 0.0
    for endpoint, share in ENDPOINT_SHARES:
        floor += share
        if roll < floor:
            return endpoint if endpoint != "embeddings" or embedders else "chat.completions"
    return "chat.completions"


def plan_call(rng: random.Random, models: Sequence[str], keys: int,
              embedders: Sequence[str] = (), audience: Audience | None = None,
              completers: Collection[str] | None = None) -> PlannedCall:
    """One request of the mix (about 70% name an alias with the example config), for
    someone of `audience`; legacy completions only on `completers` (None: any name)."""
    aliases = [m for m in models if m in DEFAULT_ALIASES]
    model = rng.choice(aliases) if aliases and rng.random() < 0.6 else rng.choice(models)
    roll = rng.random()
    messages: list[ChatCompletionMessageParam]
    if roll < 0.5:
        kind, messages = "short", [{"role": "user", "content": rng.choice(SHORT_PROMPTS)}]
    elif roll < 0.85:
        kind = "paragraph"
        messages = [{"role": "system", "content": "You write helpful support replies."},
                    {"role": "user", "content": PARAGRAPH * rng.randint(1, 4)
                     + "Draft a reply to a customer whose parcel is late."}]
    else:
        kind = "long"
        messages = [{"role": "system", "content": HANDBOOK},
                    {"role": "user", "content": rng.choice(SHORT_PROMPTS)}]
    stream = rng.random() < 0.35
    endpoint = _endpoint(rng, embedders)
    if endpoint == "embeddings":
        model, stream = rng.choice(embedders), False
    if endpoint == "completions" and completers is not None and model not in completers:
        # a name that does not serve legacy completions would be the client's 400
        serving = [m for m in models if m in completers]
        model = rng.choice(serving) if serving else model
        endpoint = endpoint if serving else "chat.completions"
    key = rng.randrange(keys)
    return PlannedCall(
        model=model, key_index=key, kind=kind, messages=messages,
        stream=stream, include_usage=stream and rng.random() < 0.5,
        abandon_after=rng.randint(1, 5) if stream and rng.random() < 0.05 else None,
        max_tokens=rng.choice((None, 64, 128, 256, 512)),
        tools=[LOOKUP_TOOL] if rng.random() < 0.05 else None,
        priority=rng.choice(("high", "budget")) if rng.random() < 0.1 else None,
        endpoint=endpoint, visit=audience.visit(key) if audience else NO_VISIT,
    )


def _text(messages: Sequence[ChatCompletionMessageParam]) -> str:
    return "\n".join(str(m.get("content") or "") for m in messages)


async def _send_other(client: openai.AsyncOpenAI, call: PlannedCall) -> bool:
    """A call on an API other than chat: Responses, legacy completions or embeddings."""
    max_tokens = call.max_tokens or openai.omit
    visit = call.visit
    headers = visit.headers(call.endpoint) or None
    user = visit.body_user or openai.omit
    if call.endpoint == "embeddings":
        await client.embeddings.create(model=call.model, input=_text(call.messages), user=user,
                                       extra_headers=headers)
        return True
    if call.endpoint == "completions":
        if not call.stream:
            await client.completions.create(model=call.model, prompt=_text(call.messages),
                                            max_tokens=max_tokens, user=user,
                                            extra_headers=headers)
            return True
        chunks = await client.completions.create(
            model=call.model, prompt=_text(call.messages), max_tokens=max_tokens, stream=True,
            user=user, extra_headers=headers)
        async with chunks:
            async for _ in chunks:
                pass
        return True
    system = [m for m in call.messages if m["role"] == "system"]
    instructions = str(system[0].get("content")) if system else openai.omit
    prompt = _text([m for m in call.messages if m["role"] != "system"])
    # `user`, not `safety_identifier`: the gateway's Responses-to-chat translation (for
    # upstreams without a Responses API) refuses the latter, a 400 on most models
    metadata = visit.tags or openai.omit
    if not call.stream:
        await client.responses.create(model=call.model, input=prompt, instructions=instructions,
                                      max_output_tokens=max_tokens, user=user,
                                      metadata=metadata, extra_headers=headers)
        return True
    events = await client.responses.create(model=call.model, input=prompt, stream=True,
                                           instructions=instructions,
                                           max_output_tokens=max_tokens, user=user,
                                           metadata=metadata, extra_headers=headers)
    read = 0
    async with events:
        async for _ in events:
            read += 1
            if call.abandon_after is not None and read >= call.abandon_after:
                return False
    return True


async def _send_messages(client: anthropic.AsyncAnthropic, call: PlannedCall) -> bool:
    """A call on Anthropic's Messages API, as Claude Code and its kind make it."""
    system = [str(m.get("content")) for m in call.messages if m["role"] == "system"]
    user = _text([m for m in call.messages if m["role"] != "system"])
    kwargs = {"model": call.model, "max_tokens": call.max_tokens or 256,
              "messages": [{"role": "user", "content": user}],
              "extra_headers": call.visit.headers(call.endpoint) or None}
    if system:
        kwargs["system"] = system[0]
    if call.visit.body_user:
        kwargs["metadata"] = {"user_id": call.visit.body_user}
    if not call.stream:
        await client.messages.create(**kwargs)  # type: ignore[call-overload]
        return True
    async with client.messages.stream(**kwargs) as events:  # type: ignore[arg-type]
        async for _ in events:
            pass
    return True


async def _send(client: openai.AsyncOpenAI, call: PlannedCall) -> bool:
    """True when the call completed; False when it was abandoned on purpose."""
    # omit (the SDK's default) leaves a parameter out of the request body
    max_tokens = call.max_tokens or openai.omit
    tools = call.tools or openai.omit
    headers = call.visit.headers(call.endpoint)
    if call.priority:
        headers["x-costgate-priority"] = call.priority
    user = call.visit.body_user or openai.omit
    metadata = call.visit.tags or openai.omit
    if not call.stream:
        await client.chat.completions.create(
            model=call.model, messages=call.messages, max_tokens=max_tokens, tools=tools,
            user=user, metadata=metadata, extra_headers=headers or None)
        return True
    usage: ChatCompletionStreamOptionsParam | openai.Omit = (
        {"include_usage": True} if call.include_usage else openai.omit)
    stream = await client.chat.completions.create(
        model=call.model, messages=call.messages, stream=True, stream_options=usage,
        max_tokens=max_tokens, tools=tools, user=user, metadata=metadata,
        extra_headers=headers or None)
    read = 0
    async with stream:
        async for _chunk in stream:
            read += 1
            if call.abandon_after is not None and read >= call.abandon_after:
                return False  # leaving the block closes the connection mid-stream
    return True


def _error_name(err: Exception) -> str:
    status = getattr(err, "status_code", None)
    return f"{type(err).__name__}({status})" if status else type(err).__name__


async def run_traffic(
    base_url: str,
    api_keys: Sequence[str | None] = (None,),
    config: Config | None = None,
    *,
    models: Sequence[str] | None = None,
    max_requests: int = 1000,
    max_seconds: float = 600.0,
    concurrency: int = 4,
    rate_per_s: float | None = None,
    stop_event: StopSignal | None = None,
    log_every: int = 100,
    seed: int | None = None,
    timeout_s: float = 60.0,
    on_progress: Callable[[str], None] | None = None,
) -> TrafficSummary:
    """Send the mix to `base_url` (an OpenAI base URL, …/v1) until a bound is reached.

    `models` defaults to every alias and model of `config`. `rate_per_s` paces the whole
    run (None: as fast as `concurrency` allows). Returns the tally; a one-line summary goes
    to `on_progress` (default: the "costgate.traffic" logger at INFO) every `log_every`
    requests and at the end.
    """
    progress = on_progress or log.info
    names = list(models) if models else default_models(config)
    keys = list(api_keys) or [None]
    clients = [openai.AsyncOpenAI(base_url=base_url, api_key=k or "no-key", max_retries=0,
                                  timeout=timeout_s) for k in keys]
    # Anthropic's SDK appends /v1/messages to a base URL without the /v1
    root = base_url.rstrip("/").removesuffix("/v1")
    claude = [anthropic.AsyncAnthropic(base_url=root, api_key=k or "no-key", max_retries=0,
                                       timeout=timeout_s) for k in keys]
    embedders = embedding_models(config)
    completers = completion_models(config) if config is not None else None
    rng = random.Random(seed)
    summary = TrafficSummary(audience=Audience(rng, len(keys)))
    deadline = summary.started + max_seconds
    interval = 1 / rate_per_s if rate_per_s else 0.0
    next_start = summary.started

    def stopping() -> bool:
        return (summary.sent >= max_requests or time.monotonic() >= deadline
                or (stop_event is not None and stop_event.is_set()))

    async def worker() -> None:
        nonlocal next_start
        while not stopping():
            if interval:
                # each request takes the next slot of the shared schedule
                slot, next_start = next_start, max(next_start, time.monotonic()) + interval
                await asyncio.sleep(max(0.0, slot - time.monotonic()))
                if stopping():
                    return
            call = plan_call(rng, names, len(keys), embedders, summary.audience, completers)
            summary.sent += 1
            number = summary.sent
            summary.models[call.model] += 1
            summary.kinds[call.kind] += 1
            summary.endpoints[call.endpoint] += 1
            summary.streams += call.stream
            try:
                if call.endpoint == "messages":
                    done = await _send_messages(claude[call.key_index], call)
                elif call.endpoint != "chat.completions":
                    done = await _send_other(clients[call.key_index], call)
                else:
                    done = await _send(clients[call.key_index], call)
                if done:
                    summary.ok += 1
                else:
                    summary.cancelled += 1
            except Exception as err:  # noqa: BLE001 - a demo keeps going, and counts it
                summary.errors[_error_name(err)] += 1
            if log_every and number % log_every == 0:
                progress(summary.line())

    async def watch_stop(tasks: list[asyncio.Task[None]]) -> None:
        # in-flight requests are cancelled too, so a stop takes effect within ~0.1 s
        while not all(t.done() for t in tasks):
            if stop_event is not None and stop_event.is_set() \
                    or time.monotonic() >= deadline:
                for t in tasks:
                    t.cancel()
                return
            await asyncio.sleep(0.1)

    tasks = [asyncio.create_task(worker()) for _ in range(max(1, concurrency))]
    watcher = asyncio.create_task(watch_stop(tasks))
    try:
        await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        watcher.cancel()
        for client in clients:
            await client.close()
        for other in claude:
            await other.close()
    progress(summary.line())
    return summary
