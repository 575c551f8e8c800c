"""Messages streams to the client: Anthropic's named events, written as Anthropic does.

The events come from a `MessagesStream`: the native Anthropic parser (events as they
came) or the translation of a chat stream. They go through the one relay pump of every
API (`gateway.replica.stream_relay.relay`) with this format: each event with its
`event:` name, the model the client asked for, the closing events of a stream whose
upstream ended without its own, and Anthropic's own error events.
"""

from __future__ import annotations

from typing import Any, Protocol

from gateway.domain import json_codec
from gateway.providers.adapter import StreamParser
from gateway.replica.messages.errors import stream_error_event
from gateway.replica.stream_relay import ClientFormat


class MessagesStream(StreamParser, Protocol):
    def close(self) -> list[dict[str, Any]]:
        """The closing events of a stream whose upstream ended without its own."""
        ...


def encode(event: dict[str, Any]) -> bytes:
    kind = event.get("type", "message")
    name = kind.encode() if isinstance(kind, str) else str(kind).encode()
    return b"event: " + name + b"\ndata: " + json_codec.dumps(event) + b"\n\n"


def client_event(event: dict[str, Any], public_model: str) -> bytes:
    if event.get("type") == "message_start" and isinstance(event.get("message"), dict):
        event["message"]["model"] = public_model
    return encode(event)


def _error(message: str) -> bytes:
    return encode(stream_error_event(message))


def _deadline_error(message: str) -> bytes:
    return encode(stream_error_event(message, "timeout_error"))


# Messages streams: named events, usage always in them (Anthropic's streams carry it),
# no closing line after `message_stop`; the response cache replays stored events with it
MESSAGES_FORMAT = ClientFormat(
    encode=lambda event, model, _usage: client_event(event, model), done=None, error=_error,
    closes=True, deadline_error=_deadline_error, upstream_error=encode,
    malformed="the upstream sent a malformed event",
)
