"""One client request as it moves through the gateway, and where it ends up.

Plain data and two small interfaces, shared by the request path (`gateway.replica.service`),
the stream relay and the record builder.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from gateway.attribution.inputs import NO_ATTRIBUTION, Attribution
from gateway.domain.config import Model
from gateway.domain.endpoints import Endpoint
from gateway.domain.usage_record import UsageRecord
from gateway.quality.signals import NO_SIGNALS, Signals
from gateway.quota.guard import Admission
from gateway.replica.auth import Caller
from gateway.replica.chat_request import ChatRequest
from gateway.routing.policy import RoutePlan


class RecordSink:
    """Where finished records go: the ledger writer and the metrics, both non-blocking."""

    def __init__(
        self,
        submit: Callable[[UsageRecord], None] | None = None,
        observe: Callable[[UsageRecord], None] | None = None,
    ) -> None:
        self._submit = submit
        self._observe = observe

    def __call__(self, record: UsageRecord) -> None:
        if self._submit is not None:
            self._submit(record)
        if self._observe is not None:
            self._observe(record)


class AttemptHooks:
    """What the request path tells the metrics about each upstream attempt."""

    def attempt(self, model: str, provider: str, outcome: str) -> None: ...
    def retry(self, model: str, provider: str, reason: str) -> None: ...
    def fallback(self, from_model: str, to_model: str) -> None: ...
    def breaker(self, provider: str, model: str, state: int) -> None: ...
    def inflight(self, delta: int) -> None: ...


class MetricsHooks(AttemptHooks):
    """The hooks of a replica: each one forwarded to its metrics (`ReplicaMetrics`)."""

    def __init__(self, metrics: Any) -> None:
        self.m = metrics

    def attempt(self, model: str, provider: str, outcome: str) -> None:
        self.m.observe_attempt(model, provider, outcome)

    def retry(self, model: str, provider: str, reason: str) -> None:
        self.m.observe_retry(model, provider, reason)

    def fallback(self, from_model: str, to_model: str) -> None:
        self.m.observe_fallback(from_model, to_model)

    def breaker(self, provider: str, model: str, state: int) -> None:
        self.m.set_breaker_state(provider, model, state)

    def inflight(self, delta: int) -> None:
        self.m.inflight_delta(delta)


@dataclasses.dataclass(slots=True)
class Exchange:
    """The state of one client request as it moves through the gateway."""

    request_id: uuid.UUID
    started: float
    started_at: dt.datetime
    caller: Caller
    requested: str
    endpoint: Endpoint = Endpoint.CHAT_COMPLETIONS  # the API the app called
    stream: bool = False
    request: ChatRequest | None = None
    plan: RoutePlan | None = None
    model: Model | None = None
    attempts: int = 0
    billed_failures: int = 0  # failed attempts the provider may have billed (a timeout...)
    path: list[str] = dataclasses.field(default_factory=list)
    upstream_ms: int | None = None
    ttft_ms: int | None = None
    relay_started: bool = False
    recorded: bool = False  # its one ledger record was handed over
    # its reservations on budgets and key limits (None: none applied), and the tokens
    # each attempt reserved on its model's tpm cap
    admission: Admission | None = None
    reserved_tokens: int = 0
    # prompt tokens dropped to fit the model's context window (None: none dropped)
    trimmed_tokens: int | None = None
    # the end user (as stored: plain or hashed), session and tags (gateway.attribution)
    attribution: Attribution = NO_ATTRIBUTION
    # what the answer says of its quality (gateway.quality.signals), and the experiment
    # and variant that routed it (None: none)
    signals: Signals = NO_SIGNALS
    experiment: tuple[str, str] | None = None
    # its record's (actual, list) cost in USD once built: a plain answer's headers say them
    costs: tuple[Decimal | None, Decimal | None] | None = None

    def elapsed_ms(self) -> int:
        return int((time.perf_counter() - self.started) * 1000)


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)
