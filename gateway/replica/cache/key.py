"""The cache key of one request: its app, its API and every generation parameter.

Pure. The key hashes the body as the client sent it (model, messages, tools, temperature,
max tokens, response format, seed and whatever else it carries: a field this gateway does
not know still changes the answer, so it is in the key) and the routing headers that
change the answer (`ANSWER_HEADERS`), scoped to the app: two apps
never share an entry. `stream` and `stream_options` are left out: one entry answers a
plain and a streamed request (`replay`, `assemble`), and a stored stream keeps its usage
chunk, which a hit sends or not as the request asks.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import orjson

from gateway.domain.endpoints import Endpoint

KEY_VERSION = "5"  # bump when what an entry holds or how the key is made changes
PREFIX = "costgate:cache:"
_IGNORED = frozenset({"stream", "stream_options"})
# what orjson cannot write (an integer beyond 64 bits) goes to json: such a body's bytes
# hold a literal orjson never writes, so the two encodings cannot give one key to two
# bodies; NaN, which orjson writes as null, is sent upstream as null too (json_codec)
_STDLIB = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
).encode


# request headers that change the answer: the model forced, the routing priority, the
# fallbacks allowed, the context trimming policy (one trimmed under `drop_oldest` must not
# answer a request that asked for `error`), and the Anthropic API version and beta
# features that `/v1/messages` passes to a native upstream
ANSWER_HEADERS = ("x-costgate-model", "x-costgate-priority", "x-costgate-no-fallback",
                  "x-costgate-trim", "anthropic-version", "anthropic-beta")  # fmt: skip
_ANSWER_SET = frozenset(ANSWER_HEADERS)
_ANSWER_RAW = frozenset(h.encode() for h in ANSWER_HEADERS)


def _canonical(value: Any) -> bytes:
    # orjson: a third of json's time, on every opted-in request (a miss included)
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS, default=str)
    except orjson.JSONEncodeError:
        return _STDLIB(value).encode()


def cache_key(
    app: str, endpoint: Endpoint, body: dict[str, Any], headers: Mapping[str, str] | None = None
) -> str:
    params = body if _IGNORED.isdisjoint(body) else {
        k: v for k, v in body.items() if k not in _IGNORED}
    given: dict[str, str] = {}
    if headers:
        # one pass over the request's headers, not a scan of them per answer header; the
        # first of repeated ones counts, as `get` would give it
        first: dict[str, str] = {}
        raw: list[tuple[bytes, bytes]] | None = getattr(headers, "raw", None)
        if raw is not None:  # Starlette's Headers: ASGI's names are lowercase bytes
            for rname, rvalue in raw:
                if rname in _ANSWER_RAW and (name := rname.decode()) not in first:
                    first[name] = rvalue.decode("latin-1")
        else:
            for name, value in headers.items():
                if (name := name.lower()) in _ANSWER_SET and name not in first:
                    first[name] = value
        for h in ANSWER_HEADERS:
            if (value := first.get(h, "").strip()):
                given[h] = value
    canonical = _canonical([KEY_VERSION, app, endpoint.value, params, given])
    return PREFIX + hashlib.sha256(canonical).hexdigest()
