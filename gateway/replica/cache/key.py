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

from gateway.domain.endpoints import Endpoint

KEY_VERSION = "4"  # bump when what an entry holds changes: old entries then miss
PREFIX = "costgate:cache:"
_IGNORED = frozenset({"stream", "stream_options"})
# built once: json.dumps with options builds an encoder per call, most of a small key's cost
_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
).encode


# request headers that change the answer: the model forced, the routing priority, the
# fallbacks allowed, the context trimming policy (one trimmed under `drop_oldest` must not
# answer a request that asked for `error`), and the Anthropic API version and beta
# features that `/v1/messages` passes to a native upstream
ANSWER_HEADERS = ("x-costgate-model", "x-costgate-priority", "x-costgate-no-fallback",
                  "x-costgate-trim", "anthropic-version", "anthropic-beta")  # fmt: skip


def cache_key(
    app: str, endpoint: Endpoint, body: dict[str, Any], headers: Mapping[str, str] | None = None
) -> str:
    params = body if _IGNORED.isdisjoint(body) else {
        k: v for k, v in body.items() if k not in _IGNORED}
    given: dict[str, str] = {}
    if headers:
        for h in ANSWER_HEADERS:
            value = headers.get(h)
            if value and (value := value.strip()):
                given[h] = value
    canonical = _CANONICAL([KEY_VERSION, app, endpoint.value, params, given])
    return PREFIX + hashlib.sha256(canonical.encode()).hexdigest()
