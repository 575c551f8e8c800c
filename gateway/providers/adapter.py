"""The seam between the request path and an upstream's wire format.

The request path speaks one shape, OpenAI's chat completions: the body it sends is an
OpenAI chat body (`gateway.replica.chat_request.upstream_body`), and what it relays are
OpenAI chat completions and chunks. A `ProviderAdapter`, chosen by `Provider.kind`,
turns that body into the upstream's HTTP request, and the upstream's answer (a body or
a stream of SSE events) back into that shape, with the usage in our token classes.
Adding a wire format (Anthropic's Messages, Gemini's generateContent) is a new adapter
registered in `gateway.providers.registry`; the request path does not change.

Like httpx's transports, the interface is small and the I/O stays outside it: adapters
are pure (bytes in, dicts out), so each one is unit-tested without a network.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol, runtime_checkable

from gateway.domain.config import Provider
from gateway.domain.endpoints import Endpoint
from gateway.domain.pricing import TokenUsage


class MalformedReply(ValueError):
    """An answer that is not what the upstream's API promises (the message says what)."""


@dataclasses.dataclass(frozen=True, slots=True)
class WireRequest:
    """One HTTP request to an upstream: always a POST of a JSON body."""

    url: str
    headers: dict[str, str]
    content: bytes


@dataclasses.dataclass(frozen=True, slots=True)
class ChatReply:
    """A whole (non-streamed) answer, translated: OpenAI's chat completion body, the
    usage it reports (None when it reports none) and its generated text (for estimates)."""

    body: dict[str, Any]
    usage: TokenUsage | None
    text: str


class StreamParser(Protocol):
    """Reads one upstream stream, event by event, and keeps what it learns.

    `feed` takes the data of one SSE event and returns the OpenAI chat chunks to relay
    (none, one or several). Usage may arrive in pieces (Anthropic reports input tokens
    first, cumulative output tokens later): `usage` is the stream's usage so far, None
    until the upstream reported any.
    """

    @property
    def finished(self) -> bool:
        """The upstream said the answer is complete ([DONE] or a finish reason)."""
        ...

    @property
    def done(self) -> bool:
        """The stream's terminal event arrived: nothing more will come."""
        ...

    @property
    def usage(self) -> TokenUsage | None: ...

    def text(self) -> str:
        """The text relayed so far, to estimate usage when none was reported."""
        ...

    def feed(self, payload: bytes) -> list[dict[str, Any]]:
        """Raises `MalformedReply` for an event that cannot be read."""
        ...


class ProviderAdapter(Protocol):
    kind: str

    def chat_request(
        self, provider: Provider, body: dict[str, Any], api_key: str | None
    ) -> WireRequest:
        """The upstream request for an OpenAI chat body (its `stream` flag included)."""
        ...

    def parse_chat(self, content: bytes) -> ChatReply:
        """A 200 answer's body; raises `MalformedReply` when it is not a completion."""
        ...

    def stream_parser(self) -> StreamParser: ...

    def error_body(self, content: bytes) -> dict[str, Any] | None:
        """An upstream 4xx body as OpenAI's `{"error": {...}}`, to pass on; None when the
        body says nothing usable."""
        ...


@runtime_checkable
class EndpointAdapter(Protocol):
    """An adapter that serves ingress APIs beyond chat completions (embeddings, legacy
    completions, Responses): it declares which in `endpoints`, and builds and reads the
    wire format of each. `gateway.providers.registry.endpoints_of` says what a provider
    serves; the request path sends a model only the endpoints its adapter declares."""

    endpoints: frozenset[Endpoint]

    def endpoint_request(
        self, provider: Provider, endpoint: Endpoint, body: dict[str, Any], api_key: str | None
    ) -> WireRequest:
        """The upstream request for a body of `endpoint`'s API (its `stream` flag included)."""
        ...

    def parse_endpoint(self, endpoint: Endpoint, content: bytes) -> ChatReply:
        """A 200 answer of `endpoint`'s API: the body as the client gets it, its usage."""
        ...

    def endpoint_stream_parser(self, endpoint: Endpoint) -> StreamParser:
        """Reads a stream of `endpoint`'s API; `feed` returns its events as dicts."""
        ...
