"""JSON on the request path, through orjson, with the standard library's behaviour.

A replica decodes and re-encodes every body (the client's request, the upstream body, its
answer, each stream chunk both ways); orjson does each several times faster than `json`
(docs/PERFORMANCE.md). It is stricter than `json` in a few corners: it refuses integers
beyond 64 bits, NaN and Infinity on input, lone surrogates and nesting past 1024 levels.
There the standard library takes over, so what is accepted, what it becomes and every
error message stay exactly as they were with `json` alone.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import orjson

_COMPACT = (",", ":")
# orjson reads an integer beyond 64 bits as a float (json: an exact int); 18 digits or
# fewer always fit, so a body with a longer run of digits anywhere is left to json
_LONG_NUMBER = re.compile(rb"[0-9]{19}")


def loads(data: bytes | str, *, parse_constant: Callable[[str], Any] | None = None) -> Any:
    """`json.loads`, faster for what orjson reads (`parse_constant` as json's: orjson
    never yields NaN or Infinity, so only the fallback meets them)."""
    # text (error bodies, decoded leniently) is rare on the request path: json reads it
    if isinstance(data, bytes) and _LONG_NUMBER.search(data) is None:
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    if parse_constant is None:
        return json.loads(data)
    return json.loads(data, parse_constant=parse_constant)


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON. What orjson cannot write (an integer beyond 64 bits, a key
    that is not a string) is written by `json`; NaN and Infinity, which JSON has no
    words for, come out as null."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        return json.dumps(value, separators=_COMPACT, ensure_ascii=False).encode()
