"""The cache key of one request: its app, its API and every generation parameter.

Pure. The key hashes the body as the client sent it (model, messages, tools, temperature,
max tokens, response format, seed and whatever else it carries: a field this gateway does
not know still changes the answer, so it is in the key), scoped to the app: two apps
never share an entry. Only `stream_options` is left out, because a stored stream keeps
its usage chunk and a hit sends it or not as the request asks.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from gateway.domain.endpoints import Endpoint

KEY_VERSION = "1"  # bump when what an entry holds changes: old entries then miss
PREFIX = "costgate:cache:"
_IGNORED = frozenset({"stream_options"})


def cache_key(app: str, endpoint: Endpoint, body: dict[str, Any]) -> str:
    params = {k: v for k, v in body.items() if k not in _IGNORED}
    canonical = json.dumps(
        [KEY_VERSION, app, endpoint.value, params],
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        default=str,
    )
    return PREFIX + hashlib.sha256(canonical.encode()).hexdigest()
