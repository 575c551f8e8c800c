"""Server-sent events of OpenAI's chat streams: framing and usage, no I/O.

An upstream stream is `data: <json>\\n\\n` events ending with `data: [DONE]`. The gateway
rewrites each chunk's `model` to what the client asked for, keeps the usage chunk (sent
because we always ask for it) and hides it from clients that did not ask, and counts the
text it relayed so that a cancelled stream can be estimated.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

DONE = b"[DONE]"


class SSEDecoder:
    """Splits a byte stream into the data payloads of its events.

    Lines may arrive split across network reads, so bytes are buffered until a blank
    line ends an event. Comments (`:`) and fields other than `data` are ignored.
    """

    def __init__(self) -> None:
        self._buffer = b""
        self._data: list[bytes] = []

    def feed(self, chunk: bytes) -> Iterator[bytes]:
        self._buffer += chunk
        while True:
            cut = self._buffer.find(b"\n")
            if cut < 0:
                return
            line = self._buffer[:cut].rstrip(b"\r")
            self._buffer = self._buffer[cut + 1 :]
            if not line:
                if self._data:
                    yield b"\n".join(self._data)
                    self._data = []
                continue
            if line.startswith(b"data:"):
                value = line[5:]
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


def encode_event(payload: dict[str, Any] | bytes) -> bytes:
    data = (
        payload
        if isinstance(payload, bytes)
        else json.dumps(payload, separators=(",", ":")).encode()
    )
    return b"data: " + data + b"\n\n"


@dataclasses.dataclass(slots=True)
class StreamTally:
    """What the gateway learned from the chunks it relayed."""

    usage: dict[str, Any] | None = None
    text_parts: list[str] = dataclasses.field(default_factory=list)
    chunks: int = 0
    finished: bool = False  # saw [DONE] or a finish_reason

    def text(self) -> str:
        return "".join(self.text_parts)


class MalformedChunk(ValueError):
    pass


def rewrite_chunk(
    payload: bytes, *, public_model: str, tally: StreamTally, include_usage: bool
) -> bytes | None:
    """One upstream event in, the event for the client out (None: send nothing)."""
    if payload.strip() == DONE:
        tally.finished = True
        return encode_event(DONE)
    try:
        chunk = json.loads(payload)
    except ValueError as err:
        raise MalformedChunk(f"an upstream stream chunk is not JSON: {err}") from None
    if not isinstance(chunk, dict):
        raise MalformedChunk("an upstream stream chunk is not a JSON object")
    tally.chunks += 1
    usage = chunk.get("usage")
    if isinstance(usage, dict):
        tally.usage = usage
    choices = chunk.get("choices")
    if isinstance(choices, list):
        for choice in choices:
            if not isinstance(choice, dict):
                continue
            delta = choice.get("delta")
            if isinstance(delta, dict):
                content = delta.get("content")
                if isinstance(content, str):
                    tally.text_parts.append(content)
                for call in delta.get("tool_calls") or ():
                    fn = call.get("function") if isinstance(call, dict) else None
                    if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
                        tally.text_parts.append(fn["arguments"])
            if choice.get("finish_reason"):
                tally.finished = True
    if not include_usage:
        if choices == [] and usage is not None:
            return None  # the usage chunk the client did not ask for
        if "usage" in chunk:
            chunk.pop("usage")
    if "model" in chunk:
        chunk["model"] = public_model
    return encode_event(chunk)
