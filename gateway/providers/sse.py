"""Server-sent events: the framing every streaming wire format shares, no I/O.

An upstream stream is `data: <payload>\\n\\n` events (OpenAI's end with `data: [DONE]`;
Anthropic's name each event as well). What a payload means is the adapter's business
(`gateway.providers.openai`); this module only cuts the bytes into events and writes them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gateway.domain import json_codec
from gateway.providers.adapter import MalformedReply

DONE = b"[DONE]"
# An event larger than this is no chat chunk: an upstream that never sends a newline
# must not grow the replica's memory without bound.
MAX_EVENT_BYTES = 8 * 1024 * 1024


class EventTooLarge(MalformedReply):
    pass


class SSEDecoder:
    """Splits a byte stream into the data payloads of its events.

    Lines may arrive split across network reads, so bytes are buffered until a blank
    line ends an event. Comments (`:`) and fields other than `data` are ignored. A line
    or an event over `max_event_bytes` raises `EventTooLarge`.
    """

    def __init__(self, max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        self._buffer = b""
        self._data: list[bytes] = []
        self._data_bytes = 0
        self._max = max_event_bytes

    def feed(self, chunk: bytes) -> Iterator[bytes]:
        self._buffer += chunk
        while True:
            cut = self._buffer.find(b"\n")
            if cut < 0:
                if len(self._buffer) > self._max:
                    raise EventTooLarge(f"an upstream stream line over {self._max} bytes")
                return
            line = self._buffer[:cut].rstrip(b"\r")
            self._buffer = self._buffer[cut + 1 :]
            if not line:
                if self._data:
                    yield b"\n".join(self._data)
                    self._data = []
                    self._data_bytes = 0
                continue
            if line.startswith(b"data:"):
                value = line[5:]
                self._data_bytes += len(value)
                if self._data_bytes > self._max:
                    raise EventTooLarge(f"an upstream stream event over {self._max} bytes")
                self._data.append(value[1:] if value.startswith(b" ") else value)

    def flush(self) -> Iterator[bytes]:
        """What remains when the stream ends without a final blank line."""
        if self._buffer.strip():
            line = self._buffer.rstrip(b"\r\n")
            if line.startswith(b"data:"):
                value = line[5:]
                self._data.append(value[1:] if value.startswith(b" ") else value)
        self._buffer = b""
        if self._data:
            yield b"\n".join(self._data)
            self._data = []
            self._data_bytes = 0


def encode_event(payload: dict[str, Any] | bytes) -> bytes:
    data = (
        payload
        if isinstance(payload, bytes)
        else json_codec.dumps(payload)
    )
    return b"data: " + data + b"\n\n"
