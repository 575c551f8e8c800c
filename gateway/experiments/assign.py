"""Which variant a request gets: a pure function of the experiment's name and the
sticky key (end user, session or request id), so every replica agrees without talking.

The key is hashed with BLAKE2b (8 bytes) into [0, 2^64) and mapped onto the split's
cumulative shares. A request without the key it sticks by (no end user, no session)
is left out of the experiment and routed by the alias's live weights, as is one from an
app the experiment does not include. `max_requests` is enforced per replica, as its
share of the total (the replica count known to it): about that many, never a query.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
from collections.abc import Mapping
from decimal import Decimal

from gateway.experiments.spec import Experiment

_SPAN = 1 << 64


@dataclasses.dataclass(frozen=True, slots=True)
class Assignment:
    experiment: str
    variant: str
    weights: Mapping[str, Decimal]


def bucket(experiment: str, key: str) -> float:
    digest = hashlib.blake2b(f"{experiment}\x00{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / _SPAN


def pick_variant(exp: Experiment, name: str, key: str) -> str:
    point = bucket(name, key) * sum(exp.split.values())
    acc = 0
    for variant, share in exp.split.items():
        acc += share
        if point < acc:
            return variant
    return next(v for v, s in reversed(exp.split.items()) if s > 0)


class Assigner:
    """The running experiments of one routing version, by alias (one per alias)."""

    def __init__(self, experiments: Mapping[str, Experiment]) -> None:
        self._by_alias = {e.alias: (n, e) for n, e in experiments.items() if e.stopped_at is None}
        self._counts: dict[str, int] = {}

    def __bool__(self) -> bool:
        return bool(self._by_alias)

    def assign(
        self,
        alias: str,
        app: str,
        sticky: Mapping[str, str | None],
        now: dt.datetime,
        replicas: int = 1,
    ) -> Assignment | None:
        found = self._by_alias.get(alias)
        if found is None:
            return None
        name, exp = found
        key = sticky.get(exp.stick)
        if key is None or not exp.running(now) or (exp.apps is not None and app not in exp.apps):
            return None
        if exp.max_requests is not None:
            seen = self._counts.get(name, 0)
            if seen * max(replicas, 1) >= exp.max_requests:
                return None
            self._counts[name] = seen + 1
        variant = pick_variant(exp, name, key)
        return Assignment(name, variant, exp.variants[variant])
