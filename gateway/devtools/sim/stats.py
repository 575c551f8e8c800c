"""What the simulator has seen: counters for tests, never a key.

The Authorization header is kept only as "present" and a short SHA-256 prefix, so a test
can check that a gateway sent the provider's key (by hashing the key it expects) without
the simulator ever holding or printing one.
"""

from __future__ import annotations

import hashlib
from collections import Counter, deque
from typing import Any

RECENT_REQUESTS = 100
_SCALARS = (str, int, float, bool, type(None))


def bearer_fingerprint(authorization: str | None) -> str | None:
    if not authorization or not authorization.lower().startswith("bearer "):
        return None
    token = authorization[7:].strip()
    return hashlib.sha256(token.encode()).hexdigest()[:12] if token else None


class SimStats:
    def __init__(self) -> None:
        # gauges: what is open right now, so a reset of the counters leaves them alone
        self.in_flight = 0
        self.streams_open = 0
        self.reset()

    def reset(self) -> None:
        self.requests: Counter[str] = Counter()
        self.with_bearer: Counter[str] = Counter()
        self.bearer_fingerprints: Counter[str] = Counter()
        self.statuses: Counter[int] = Counter()
        self.faults: Counter[str] = Counter()
        self.streams: Counter[str] = Counter()
        self.recent: deque[dict[str, Any]] = deque(maxlen=RECENT_REQUESTS)

    def record_request(self, model: str, body: dict[str, Any], provider: str | None,
                       header_names: list[str], authorization: str | None) -> None:
        self.requests[model] += 1
        fingerprint = bearer_fingerprint(authorization)
        if fingerprint:
            self.with_bearer[model] += 1
            self.bearer_fingerprints[fingerprint] += 1
        if body.get("stream") is True:
            self.streams[model] += 1
        self.recent.append({
            "model": model,
            "provider": provider,
            "bearer": fingerprint is not None,
            "bearer_sha256": fingerprint,
            # parameter values, but only scalars: messages and tools are summarised by name
            "params": {k: (v if isinstance(v, _SCALARS) else f"<{type(v).__name__}>")
                       for k, v in body.items() if k != "messages"},
            "header_names": sorted(header_names),
        })

    def snapshot(self, connections_open: int | None) -> dict[str, Any]:
        return {
            "total": sum(self.requests.values()),
            "requests": dict(self.requests),
            "streams": dict(self.streams),
            "with_bearer": dict(self.with_bearer),
            "bearer_sha256": dict(self.bearer_fingerprints),
            "statuses": {str(k): v for k, v in self.statuses.items()},
            "faults": dict(self.faults),
            "in_flight": self.in_flight,
            "streams_open": self.streams_open,
            "connections_open": connections_open,
        }
